#!/usr/bin/env bash
# Two builds of hetsim, A and B, on the same real runs' protocol, alternated seed by seed, each
# validated by B's `hetsim validate` against one calibration made once by B: which build's real
# runs the simulation predicts better (docs/performance.md, "First touch").
#
#   bash bench/bench_validate_ab.sh HETSIM_A HETSIM_B [POLICY] [WORKERS] [SEEDS] [ITER]
#
# POLICY (default ashl) on WORKERS (2) equal cpu workers of one node (parameter server pulls
# after_updates, validate's default), mlp, 16 samples per worker, ITER (300) iterations, seeds
# 1..SEEDS (5). Prints one line per run: policy, seed, build (A or B), validate's mean
# iteration error and total time error, the real run's mean iteration (ms), and the real run's
# mean communication per step over each worker's first 3 steps and over the rest (ms).
set -eu
A=${1:?usage: bench_validate_ab.sh HETSIM_A HETSIM_B [POLICY] [WORKERS] [SEEDS] [ITER]}
B=${2:?usage: bench_validate_ab.sh HETSIM_A HETSIM_B [POLICY] [WORKERS] [SEEDS] [ITER]}
P=${3:-ashl}
W=${4:-2}
S=${5:-5}
ITER=${6:-300}
for h in "$A" "$B"; do [ -x "$h" ] || { echo "bench_validate_ab: $h is not executable" >&2; exit 2; }; done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$B" calib --device cpu --model mlp --batches 8,16,32,48 --db "$T/cal.db" --max-reps 6 --min-reps 3 --warmup 1 \
  --comm-max 256KiB >/dev/null
cat >"$T/c.yaml" <<YAML
name: cpu-$W
network: {bandwidth: 10Gbps, latency: 20us}
parameter_server: {pull: after_updates}
device_types:
  c: {compute: {t0: 1ms, per_sample: 0.1ms}}
nodes:
  - name: n0
    devices: [{type: c, count: $W}]
YAML
echo "# bench_validate_ab: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# A=$A B=$B policy $P, $W workers, $ITER iterations"
printf "policy\tseed\tbuild\tmean_iter_error\ttotal_time_error\treal_mean_iter_ms\tcomm_first3_ms\tcomm_rest_ms\n"
for seed in $(seq 1 "$S"); do
  for b in A B; do
    h=$A
    [ $b = B ] && h=$B
    cp "$T/cal.db" "$T/r.db"
    "$h" real --policy "$P" --model mlp --global-batch $((16 * W)) --iterations "$ITER" --cluster "$T/c.yaml" \
      --train-samples 3000 --eval-samples 300 --eval-every 100 --db "$T/r.db" --calib "$T/r.db" --seed "$seed" \
      --json >"$T/r.json"
    id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/r.json")
    "$B" validate "$id" --db "$T/r.db" --json >"$T/v.json"
    comm=$(sqlite3 -separator ' ' "$T/r.db" "SELECT printf('%.3f', 1e3 * avg(CASE WHEN step < 3 THEN comm_end_s - compute_end_s END)),
      printf('%.3f', 1e3 * avg(CASE WHEN step >= 3 THEN comm_end_s - compute_end_s END))
      FROM step WHERE run_id = $id AND comm_end_s IS NOT NULL")
    python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
print("\t".join(sys.argv[2:5] + ["%.3f" % v["mean_iter_error"], "%.3f" % v["total_time_error"],
      "%.4f" % (1e3 * v["real_mean_iter_s"])] + sys.argv[5].split()))' "$T/v.json" "$P" "$seed" "$b" "$comm"
  done
done
