#!/usr/bin/env bash
# Is DDP's slow all-reduce on this VM the wake-up of an idle vCPU? Alternates homogeneous DDP runs
# of cnn (256 + 256, bench/ddp_train.py, 40 iterations, huge pages as bench_ddp.sh) plain and
# with one SCHED_IDLE busy loop pinned to each CPU: such a loop runs only when nothing else on its
# CPU can, so a CPU whose rank waits in the all-reduce never halts, and any runnable thread of the
# rank preempts it at once. Prints, per run, the mean and median all-reduce of the last rank to
# arrive (allreduce_in_ddp.py's rule) and the mean iteration.
#   bash notebooks-data/ddp-allreduce-2026-11-28/idle_spin.sh OUTDIR [ROUNDS]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: idle_spin.sh OUTDIR [ROUNDS]}
ROUNDS=${2:-3}
mkdir -p "$OUT"
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
run() { # run NAME
  /usr/bin/python3 "$SRC/bench/ddp_train.py" --model cnn --batches 256,256 --iterations 40 \
    --warmup 5 --quiet --out "$OUT/$1.json"
  /usr/bin/python3 - "$OUT/$1.json" "$1" <<'PY'
import json, statistics as st, sys
d = json.load(open(sys.argv[1]))
by = {}
for r in d["rows"]:
    if not r["warmup"]:
        by.setdefault(r["iter"], {})[r["rank"]] = r
ar = []
for rr in by.values():
    last = max(rr, key=lambda k: rr[k]["start_s"] + rr[k]["compute_s"])
    ar.append(rr[last]["allreduce_s"] * 1e3)
print(f"{sys.argv[2]:<10} all-reduce mean {st.mean(ar):.2f} ms, median {st.median(ar):.2f} ms, "
      f"share > 1 ms {sum(x > 1 for x in ar) / len(ar):.2f}; iteration "
      f"{d['summary']['mean_iteration_s'] * 1e3:.2f} ms")
PY
}
for k in $(seq 1 "$ROUNDS"); do
  run "plain$k"
  pids=()
  for c in 0 1; do
    chrt -i 0 taskset -c "$c" sh -c 'while :; do :; done' &
    pids+=($!)
  done
  run "spin$k"
  kill "${pids[@]}"
  wait "${pids[@]}" 2>/dev/null || true
done
