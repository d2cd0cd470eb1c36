#!/usr/bin/env bash
# validate on a cluster file of one node against the same workers split over two nodes
# (docs/performance.md "Staleness of asp", the cluster file of several nodes): hetsim real runs
# every worker on this machine whatever the file says, so the two prediction errors should be
# alike. A cpu calibration of mlp, then for REPS seeds a real run of POLICY (default asp) with 2
# workers and ITER pushes on each file, alternated; each run validated by HETSIM, and, given
# OTHER (another build of hetsim), by OTHER on a copy of the same database (the same runs and
# calibration: the calibration moves the errors more than most changes do). Prints one line per
# run: nodes, seed, the real and simulated communication per step (ms) and validate's mean
# iteration error, then OTHER's simulated communication and error.
#
#   bash bench/bench_validate_nodes.sh HETSIM [ITER] [REPS] [POLICY] [OTHER]
set -eu
H=${1:?usage: bench_validate_nodes.sh HETSIM [ITER] [REPS] [POLICY] [OTHER]}
ITER=${2:-300}
REPS=${3:-3}
POLICY=${4:-asp}
OTHER=${5:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$H" calib --device cpu --model mlp --batches 8,16,32,48 --db "$T/v.db" --max-reps 6 --min-reps 3 --warmup 1 \
  --comm-max 256KiB >/dev/null 2>&1
# cluster NODES: two cpu workers, on one node or one on each of two (a 1 Gbps network).
cluster() {
  echo "name: nodes-$1"
  echo "network: {bandwidth: 1Gbps, latency: 50us}"
  echo "device_types:"
  echo "  c: {compute: {t0: 1ms, per_sample: 0.1ms}}"
  echo "nodes:"
  for k in $(seq 0 $(($1 - 1))); do
    echo "  - {name: n$k, link: {bandwidth: 8GB/s, latency: 5us}, devices: [{type: c, count: $((2 / $1))}]}"
  done
}
cluster 1 >"$T/n1.yaml"
cluster 2 >"$T/n2.yaml"
printf "nodes\tseed\treal_comm_ms\tsim_comm_ms\tmean_iter_error"
if [ -n "$OTHER" ]; then printf "\tother_sim_comm_ms\tother_mean_iter_error"; fi
printf "\n"
ids=""
for seed in $(seq 1 "$REPS"); do
  for nodes in 1 2; do
    "$H" real --policy "$POLICY" --model mlp --global-batch 32 --iterations "$ITER" --cluster "$T/n$nodes.yaml" \
      --train-samples 3000 --eval-samples 300 --eval-every 100 --db "$T/v.db" --calib "$T/v.db" --seed "$seed" \
      --json >"$T/real.json" 2>/dev/null
    ids="$ids $nodes:$seed:$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/real.json")"
  done
done
# Each build validates in a database of its own (a stored simulation would be reused).
python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))' "$T/v.db" "$T/o.db"
for r in $ids; do
  IFS=: read -r nodes seed id <<<"$r"
  "$H" validate "$id" --db "$T/v.db" --json >"$T/v.json"
  if [ -n "$OTHER" ]; then "$OTHER" validate "$id" --db "$T/o.db" --json >"$T/o.json"; else echo '{}' >"$T/o.json"; fi
  python3 - "$T/v.json" "$T/o.json" "$nodes" "$seed" <<'PY'
import json, sys
d, o = (json.load(open(f)) for f in sys.argv[1:3])
cols = lambda d, keys: ["%.4f" % (1e3 * d[k]["comm_s"]) for k in keys] + ["%.3f" % d["mean_iter_error"]]
print("\t".join(sys.argv[3:5] + cols(d, ("real_step", "sim_step")) + (cols(o, ("sim_step",)) if o else [])))
PY
done
