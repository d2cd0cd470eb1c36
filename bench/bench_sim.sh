#!/usr/bin/env bash
# Simulator speed benchmarks (docs/performance.md has the figures and the machine).
# Usage: bench/bench_sim.sh [path/to/hetsim]     (make bench runs it after bench_events)
set -eu
H=${1:-build/hetsim}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

echo "== ssgd on traces/hetero-1024gpu.yaml, resnet18, global batch 65536, 1000 iterations"
for store in steps summary; do
  for rep in 1 2 3; do
    rm -f "$T/b.db"*
    /usr/bin/time -f "%e %U %S %M" -o "$T/time" "$H" sim --cluster "$HERE/../traces/hetero-1024gpu.yaml" \
      --model resnet18 --policy ssgd --global-batch 65536 --iterations 1000 --store $store \
      --db "$T/b.db" --json >"$T/out.json"
    read -r el us ss rss <"$T/time"
    # CPU time (user, sys: all threads) next to the wall time, which a loaded machine inflates.
    echo "store=$store rep=$rep: process ${el}s (CPU ${us}s user ${ss}s sys), sim+store wall_s $(json_field "$T/out.json" wall_s), events $(json_field "$T/out.json" events), peak RSS ${rss} KiB"
  done
done

echo "== ssgd, 100 iterations, summary only, generated clusters (bench/gen_cluster.sh)"
for n in 25000 50000 100000; do
  bash "$HERE/gen_cluster.sh" $n >"$T/c.yaml"
  rm -f "$T/b.db"*
  /usr/bin/time -f "%e %M" -o "$T/time" "$H" sim --cluster "$T/c.yaml" --model resnet18 --policy ssgd \
    --global-batch $((n * 32)) --iterations 100 --store summary --db "$T/b.db" --json >"$T/out.json"
  read -r el rss <"$T/time"
  echo "workers=$n: process ${el}s, wall_s $(json_field "$T/out.json" wall_s), events $(json_field "$T/out.json" events), peak RSS ${rss} KiB"
done
