#!/usr/bin/env bash
# How stale asp's updates are in a real threaded run against hetsim's simulation of the same run
# (docs/performance.md "Staleness of asp: real threads against the simulation"): a cpu
# calibration of mlp, then for 2 and 3 workers and REPS seeds, a real asp run of ITER pushes on
# the cpu backend (16 samples per worker) validated twice: its cluster file (equal cpu workers on
# one node) once with the simulator's default parameter server (`pull: at_once`) and once, in a
# second real run of the same seed, with `pull: after_updates`. Prints one line per run: pull,
# workers, seed, the mean staleness of the real run's steps and of the simulated run's, and
# validate's mean iteration and total time errors.
#
#   bash bench/bench_asp_staleness.sh HETSIM [ITER] [REPS] [POLICY]
#
# POLICY (default asp) may be another parameter-server policy, e.g. ssp.
set -eu
H=${1:?usage: bench_asp_staleness.sh HETSIM [ITER] [REPS] [POLICY]}
ITER=${2:-300}
REPS=${3:-3}
POLICY=${4:-asp}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$H" calib --device cpu --model mlp --batches 8,16,32,48 --db "$T/v.db" --max-reps 6 --min-reps 3 --warmup 1 \
  --comm-max 256KiB >/dev/null 2>&1
printf "pull\tworkers\tseed\treal_mean_staleness\tsim_mean_staleness\tmean_iter_error\ttotal_time_error\n"
for w in 2 3; do
  for seed in $(seq 1 "$REPS"); do
    for pull in at_once after_updates; do
      cat >"$T/c.yaml" <<YAML
name: cpu-$w
network: {bandwidth: 10Gbps, latency: 20us}
parameter_server: {pull: $pull}
device_types:
  c: {compute: {t0: 1ms, per_sample: 0.1ms}}
nodes:
  - name: n0
    devices: [{type: c, count: $w}]
YAML
      "$H" real --policy "$POLICY" --model mlp --global-batch $((16 * w)) --iterations "$ITER" --cluster "$T/c.yaml" \
        --train-samples 3000 --eval-samples 300 --eval-every 100 --db "$T/v.db" --calib "$T/v.db" --seed "$seed" \
        --json >"$T/real.json" 2>/dev/null
      id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/real.json")
      "$H" validate "$id" --db "$T/v.db" --json >"$T/v.json"
      python3 - "$T/v.json" "$pull" "$w" "$seed" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("\t".join(sys.argv[2:5] + ["%.3f" % d[k] for k in
      ("real_mean_staleness", "sim_mean_staleness", "mean_iter_error", "total_time_error")]))
PY
    done
  done
done
