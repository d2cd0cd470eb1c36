#!/usr/bin/env bash
# What the analytic convergence model adds to the simulator's run time: SSGD on the bundled
# 1,024-GPU cluster, resnet18, global batch 65,536, 1,000 iterations, summary only, with and
# without --convergence analytic, runs alternated so that both see the same machine load.
# Usage: bench/bench_conv.sh [path/to/hetsim] [REPS]     (docs/performance.md has the figures)
set -eu
H=${1:-build/hetsim}
REPS=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
for rep in $(seq "$REPS"); do
  for conv in none analytic; do
    rm -f "$T/b.db"*
    "$H" sim --cluster "$HERE/../traces/hetero-1024gpu.yaml" --model resnet18 --policy ssgd \
      --global-batch 65536 --iterations 1000 --store summary --db "$T/b.db" --json \
      --convergence $conv >"$T/out.json"
    echo "rep=$rep convergence=$conv wall_s $(field "$T/out.json" wall_s) events $(field "$T/out.json" events)"
  done
done | tee "$T/all"
python3 - "$T/all" <<'PY'
import sys, statistics
w = {"none": [], "analytic": []}
for line in open(sys.argv[1]):
    f = line.split()
    w[f[1].split("=")[1]].append(float(f[3]))
a, b = statistics.median(w["none"]), statistics.median(w["analytic"])
print(f"median wall_s: none {a:.4f}, analytic {b:.4f}, overhead {100 * (b / a - 1):+.1f}%")
PY
