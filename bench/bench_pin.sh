#!/usr/bin/env bash
# Pinned against unpinned worker threads (docs/performance.md, "Pinned workers"): alternates
# `hetsim real --pin auto` and `--pin none` runs of ssgd (2 workers, mlp, global batch 128,
# 200 iterations, the cpu backend) and prints per run the mean time per iteration and the share
# of steps whose compute overlapped the other worker's by less than half (steps run one after
# the other because both threads sat on one CPU), then the medians per setting.
# RANKS=1 runs each as two processes instead (torchrun-style on localhost: one rank per worker,
# real/real_rank.h), whose executors --pin auto pins one per CPU; MODEL (default mlp) and
# BATCH (default 128) change the job.
# Usage: bench/bench_pin.sh BUILD_DIR [PAIRS] [POLICY]     (PAIRS defaults to 5, POLICY to ssgd)
set -eu
B=${1:?usage: bench_pin.sh BUILD_DIR [PAIRS] [POLICY]}
PAIRS=${2:-5}
POLICY=${3:-ssgd}
RANKS=${RANKS:-0}
MODEL=${MODEL:-mlp}
BATCH=${BATCH:-128}
port=$((22000 + ($$ % 500) * 8))
# One run of the job with --pin $1: the threads, or (RANKS=1) two ranks on fresh ports.
run_one() {
  local job=(real --backend cpu --model "$MODEL" --policy "$POLICY" --global-batch "$BATCH" --iterations 200 --workers 2
             --train-samples 6000 --eval-samples 500 --eval-every 20 --db "$T/p.db" --pin "$1")
  if [ "$RANKS" = 1 ]; then
    port=$((port + 2))
    for r in 0 1; do
      RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 300 "$H" "${job[@]}" >/dev/null &
    done
    wait
  else
    "$H" "${job[@]}" >/dev/null
  fi
}
H=$B/hetsim
[ -x "$H" ] || { echo "bench_pin: no $H (build first)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo "bench_pin: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $POLICY, $MODEL, batch $BATCH, $([ "$RANKS" = 1 ] && echo "2 ranks" || echo "2 threads")"
for i in $(seq 1 "$PAIRS"); do
  for pin in auto none; do
    run_one $pin
    sqlite3 "$T/p.db" "
      WITH r AS (SELECT max(id) id FROM run),
      v AS (SELECT model_version, min(start_s) t FROM step, r WHERE run_id = r.id GROUP BY 1),
      s AS (SELECT a.worker, a.start_s, a.compute_end_s,
              (SELECT coalesce(sum(max(0, min(a.compute_end_s, b.compute_end_s) - max(a.start_s, b.start_s))), 0)
               FROM step b WHERE b.run_id = a.run_id AND b.worker <> a.worker
                 AND b.start_s < a.compute_end_s AND b.compute_end_s > a.start_s) ov
            FROM step a, r WHERE a.run_id = r.id)
      SELECT '$pin', printf('%.3f', 1e3 * (max(t) - min(t)) / (max(model_version) - min(model_version))),
             (SELECT printf('%.2f', avg(ov < 0.5 * (compute_end_s - start_s))) FROM s)
      FROM v" | tr '|' ' '
  done
done | tee "$T/rows"
python3 - "$T/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for pin in ("auto", "none"):
    r = [x for x in rows if x[0] == pin]
    print("--pin %s: median %.3f ms per iteration (%s), steps overlapped < half: median %.2f"
          % (pin, statistics.median(float(x[1]) for x in r), " ".join(x[1] for x in r),
             statistics.median(float(x[2]) for x in r)))
PY
