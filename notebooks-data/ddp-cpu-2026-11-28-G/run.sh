#!/usr/bin/env bash
# Run G: 10 rounds, each one bench_ddp.sh pass on Debian's torch 1.13 then one on PyPI's torch
# 2.5.1 (the venv of ../ddp-cpu-2026-11-28-torch2/README.md), so that the two versions meet the
# same minutes of the VM; then each version's summary over its 10 passes.
#   bash notebooks-data/ddp-cpu-2026-11-28-G/run.sh HETSIM OUTDIR [VENV_PYTHON]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
H=$(readlink -f "$1"); OUT=$2; T2=${3:-/work/venv-torch2/bin/python}
for k in $(seq 1 10); do
  for v in torch1.13 torch2.5.1; do
    PY=/usr/bin/python3; [ $v = torch2.5.1 ] && PY=$T2
    rm -rf "$OUT/$v/tmp"; mkdir -p "$OUT/$v"
    echo "$(date -u +%H:%M:%S) round $k $v"
    REPEATS=1 HETSIM_TORCH_PYTHON=$PY bash "$SRC/bench/bench_ddp.sh" "$H" "$OUT/$v/tmp" >"$OUT/$v/out$k.txt" 2>&1
    mv "$OUT/$v/tmp/pass1" "$OUT/$v/pass$k"
  done
done
for v in torch1.13 torch2.5.1; do
  SUMMARY_ONLY=1 bash "$SRC/bench/bench_ddp.sh" "$H" "$OUT/$v" >"$OUT/$v/summary.txt" 2>&1
done
