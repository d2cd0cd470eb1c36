#!/usr/bin/env bash
# Is the profile's bias against DDP a matter of method or of minute? Per round: the profile of
# bench_ddp.sh at 256 samples only (DDP at world size 1, two processes stepping at once in lock
# step, 2 rounds of fresh pairs), then two homogeneous DDP runs (256 + 256, 40 iterations) one
# after the other. Prints, per round, the profile's step median and each DDP run's ranks' median
# compute + mean update (ms), and the ratios profile / run B and run A / run B: a DDP run
# measured a minute earlier, as a predictor of the next one, against the profile.
#   bash notebooks-data/ddp-profile-vs-ddp-2026-11-28/run.sh OUTDIR [ROUNDS]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: run.sh OUTDIR [ROUNDS]}; R=${2:-10}
PY=${HETSIM_TORCH_PYTHON:-/usr/bin/python3}
mkdir -p "$OUT"
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
for k in $(seq 1 "$R"); do
  "$PY" "$SRC/tools/hetsim_profile.py" --model cnn --device cpu --ddp --concurrent 2 --rounds 2 \
    --batches 256 --budget 2 --device-name cpu-ddp --quiet --out "$OUT/profile$k.json"
  for x in a b; do
    "$PY" "$SRC/bench/ddp_train.py" --model cnn --batches 256,256 --iterations 40 --warmup 5 \
      --quiet --out "$OUT/ddp$k$x.json"
  done
  "$PY" - "$OUT" "$k" <<'PY'
import json, sys
out, k = sys.argv[1:]
p = json.load(open(f"{out}/profile{k}.json"))
step = [e["median_s"] for e in p["compute"] if e["phase"] == "step"][0] * 1e3
def compute(x):
    ranks = json.load(open(f"{out}/ddp{k}{x}.json"))["summary"]["per_rank"]
    return sum(r["median_compute_s"] + r["mean_update_s"] for r in ranks) / len(ranks) * 1e3
a, b = compute("a"), compute("b")
print(f"round {k}: profile {step:.1f}, DDP run A {a:.1f}, run B {b:.1f}; profile / B {step / b:.3f}, "
      f"A / B {a / b:.3f}", flush=True)
PY
done
