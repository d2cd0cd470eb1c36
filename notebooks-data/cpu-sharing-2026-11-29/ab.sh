#!/usr/bin/env bash
# Three cpu workers on this 2-vCPU VM (CLUSTER, default cpu-3.yaml: the threads are not pinned), the same real
# runs validated by two builds: NEW simulates the node with as many compute slots as the run
# had CPUs (hetsim validate since 2026-11-29), OLD without. bench/bench_validate.sh makes the
# runs with NEW (each policy twice per repeat) and keeps its databases; then every real run
# (both of each pair) is validated by OLD and by NEW (reused), on the same calibration.
#   bash notebooks-data/cpu-sharing-2026-11-29/ab.sh NEW_BUILD_DIR OLD_HETSIM [REPEATS] > OUT
set -eu
NEW=${1:?usage: ab.sh NEW_BUILD_DIR OLD_HETSIM [REPEATS]}
OLD=${2:?usage: ab.sh NEW_BUILD_DIR OLD_HETSIM [REPEATS]}
D=$(dirname "$0")
K=$(mktemp -d)
trap 'rm -rf "$K"' EXIT
KEEP=$K CLUSTER=${CLUSTER:-$D/cpu-3.yaml} GLOBAL_BATCH=192 POLICIES="${POLICIES:-ssgd asp lbb}" \
  bash bench/bench_validate.sh "$NEW" "${3:-3}"
printf "\nrepeat\tpolicy\trun\treal_ms\told_sim_ms\told_mean_error\tnew_sim_ms\tnew_mean_error\n"
for db in "$K"/rep*.db; do
  for id in $(sqlite3 "$db" "SELECT id FROM run WHERE kind = 'real' AND status = 'complete' ORDER BY id"); do
    pol=$(sqlite3 "$db" "SELECT policy FROM run WHERE id = $id")
    o=$("$OLD" validate "$id" --db "$db" --json)
    n=$("$NEW/hetsim" validate "$id" --db "$db" --json)
    python3 -c 'import json, sys
o, n = json.loads(sys.argv[4]), json.loads(sys.argv[5])
print("%s\t%s\t%s\t%.4f\t%.4f\t%+.4f\t%.4f\t%+.4f" % (sys.argv[1], sys.argv[2], sys.argv[3], 1e3 * o["real_mean_iter_s"],
      1e3 * o["sim_mean_iter_s"], o["mean_iter_error"], 1e3 * n["sim_mean_iter_s"], n["mean_iter_error"]))' \
      "$(basename "$db" .db)" "$pol" "$id" "$o" "$n"
  done
done
