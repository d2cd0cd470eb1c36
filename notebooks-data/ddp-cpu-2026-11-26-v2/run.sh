#!/usr/bin/env bash
# The DDP check of docs/performance.md ("Against PyTorch DDP", the run after the profile and LBB
# fixes): N passes of bench/bench_ddp.sh for each way of emulating the slowed rank, alternated
# pass by pass (sleep, repeat, sleep, ...) so that the VM's drift over the half hour hits both
# alike, then each mode's summary.
#
#   bash notebooks-data/ddp-cpu-2026-11-26-v2/run.sh build/hetsim OUTDIR [N]
#
# OUTDIR/sleep/passK and OUTDIR/repeat/passK are bench_ddp.sh's pass folders; OUTDIR/sleep.txt
# and OUTDIR/repeat.txt its summaries (SUMMARY_ONLY=1).
set -euo pipefail
H=$(readlink -f "${1:?usage: run.sh HETSIM OUTDIR [N]}")
OUT=${2:?usage: run.sh HETSIM OUTDIR [N]}
N=${3:-10}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT/sleep" "$OUT/repeat" "$OUT/tmp"
for k in $(seq 1 "$N"); do
  for mode in sleep repeat; do
    rm -rf "$OUT/tmp/$mode"
    SLOW_MODE=$mode REPEATS=1 bash "$SRC/bench/bench_ddp.sh" "$H" "$OUT/tmp/$mode" >/dev/null
    rm -rf "$OUT/$mode/pass$k"
    mv "$OUT/tmp/$mode/pass1" "$OUT/$mode/pass$k"
    echo "run.sh: pass $k $mode done ($(date -u +%H:%M:%S))" >&2
  done
done
rm -rf "$OUT/tmp"
for mode in sleep repeat; do
  SUMMARY_ONLY=1 SLOW_MODE=$mode bash "$SRC/bench/bench_ddp.sh" "$H" "$OUT/$mode" >"$OUT/$mode.txt"
  cat "$OUT/$mode.txt"
done
