#!/usr/bin/env bash
# Homogeneous DDP runs of cnn (256 + 256) alternated plain and with a SCHED_IDLE busy loop on each
# CPU (no vCPU halts while a rank waits): the ranks' median compute and the mean iteration, in ms.
#   bash notebooks-data/ddp-cpu-2026-11-28-G/spin_compute.sh OUTDIR [ROUNDS]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd); OUT=$1; R=${2:-4}; mkdir -p "$OUT"
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
run() {
  /usr/bin/python3 $SRC/bench/ddp_train.py --model cnn --batches 256,256 --iterations 40 --warmup 5 --quiet --out $OUT/$1.json
  /usr/bin/python3 -c "
import json,sys; s=json.load(open('$OUT/$1.json'))['summary']
print('$1', 'rank compute', ' '.join('%.1f'%(r['median_compute_s']*1e3) for r in s['per_rank']), 'iteration %.1f'%(s['mean_iteration_s']*1e3))"
}
for k in $(seq 1 $R); do
  run plain$k
  pids=(); for c in 0 1; do chrt -i 0 taskset -c $c sh -c 'while :; do :; done' & pids+=($!); done
  run spin$k
  kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true
done
