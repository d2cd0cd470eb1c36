#!/usr/bin/env bash
# Fresh processes stepping cnn at one batch, one after another (bench/cpu_noise.py processes):
# glibc's default allocator against glibc.malloc.hugetlb=1 (transparent huge pages for malloc's
# mmap'd chunks, which hold torch's tensors), alternated. Usage (repository root):
#   bash notebooks-data/cpu-process-modes-2026-11-26/run.sh OUTDIR
set -euo pipefail
OUT=${1:?usage: run.sh OUTDIR}
mkdir -p "$OUT"
for k in 1 2; do
  for cfg in default thp; do
    if [ $cfg = thp ]; then export GLIBC_TUNABLES=glibc.malloc.hugetlb=1; else unset GLIBC_TUNABLES; fi
    /usr/bin/python3 bench/cpu_noise.py processes 169 --rounds 15 --json "$OUT/$cfg$k.json" >"$OUT/$cfg$k.out" 2>&1
    echo "$cfg $k: $(grep 'process medians' "$OUT/$cfg$k.out")"
  done
done
