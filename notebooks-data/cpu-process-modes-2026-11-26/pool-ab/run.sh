#!/bin/bash
# A/B of OpenBLAS's pool for the "fresh processes" floor: A = the tools' default (pool at 1),
# B = OPENBLAS_NUM_THREADS=2 (the pool before the fix on 2 CPUs); alternated, 3 rounds each.
OUT=${1:?usage: run.sh OUTDIR (from the repository root)}; mkdir -p "$OUT"
for r in 1 2 3; do
  /usr/bin/python3 bench/cpu_noise.py processes 128,169,192,256,343 --rounds 5 --json "$OUT"/A$r.json > "$OUT"/A$r.out 2>&1
  OPENBLAS_NUM_THREADS=2 /usr/bin/python3 bench/cpu_noise.py processes 128,169,192,256,343 --rounds 5 --json "$OUT"/B$r.json > "$OUT"/B$r.out 2>&1
done
