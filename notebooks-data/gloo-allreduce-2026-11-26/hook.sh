#!/usr/bin/env bash
# Does bench/ddp_train.py's timing hook (a Python callback per all-reduce) lengthen DDP's
# iteration? Homogeneous cnn 256 + 256, 5 runs each with and without it (--no-hook: DDP's
# built-in all-reduce), alternated. Usage (repository root): bash .../hook.sh OUTDIR
set -euo pipefail
OUT=${1:?usage: hook.sh OUTDIR}; mkdir -p "$OUT"
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
for i in 1 2 3 4 5; do
  for m in hook nohook; do
    extra=(); [ $m = nohook ] && extra=(--no-hook)
    /usr/bin/python3 bench/ddp_train.py --model cnn --batches 256,256 --iterations 40 --warmup 5 \
      "${extra[@]}" --quiet --out "$OUT/$m$i.json"
  done
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics as st, sys
for m in ("hook", "nohook"):
    v = [json.load(open(f"{sys.argv[1]}/{m}{i}.json"))["summary"]["mean_iteration_s"] * 1e3 for i in range(1, 6)]
    print(m, " ".join(f"{x:.2f}" for x in v), f"median {st.median(v):.2f} ms")
PY
