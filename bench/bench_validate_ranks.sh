#!/usr/bin/env bash
# How far `hetsim validate` is from a multi-process run (one process per worker, torchrun-style
# on localhost, the cpu backend over TCP) against a threads' run of the same job, on this
# machine: a cpu calibration of MODEL (default mlp), copied as it is (c0.db), then the
# multi-process channel timed by `hetsim calib --device cpu` as two ranks (c.db: backend tcp),
# then REPS pairs, alternating, of a real POLICY run of ITER iterations (2 workers, global batch
# 64) as two ranks and as two threads. Each ranks run is validated twice: on c.db (kind
# `ranks`: its channel calibrated) and on c0.db (kind `ranks_uncal`: simulated as the threads
# over the cpu backend, as validate did before the channel had a calibration); each threads run
# on c.db.
# Prints one line per validation: kind, rep, the real and simulated mean communication per step
# (ms), validate's mean iteration error and total time error, and the calibration it used: the
# backend, the all-reduce and send/recv at the gradient (ms), one control message between
# processes (us; - without the channel) and the threads' hand-off (us).
#
# POLICY (default ssgd) may be a parameter-server policy (ps-bsp, asp, ssp, ksync, kasync): its ranks run has
# one process more, rank 0 the server (--server-rank); the channel is timed by two processes.
#
# OLD=HETSIM2 validates every run with a second build as well (kinds KIND_old): the same runs,
# the same calibration, the two builds' simulations.
#
#   bash bench/bench_validate_ranks.sh HETSIM [ITER] [REPS] [MODEL] [POLICY]
set -eu
H=${1:?usage: bench_validate_ranks.sh HETSIM [ITER] [REPS] [MODEL] [POLICY]}
ITER=${2:-200}
REPS=${3:-5}
MODEL=${4:-mlp}
POLICY=${5:-ssgd}
case ${POLICY%%:*} in ps-bsp | asp | ssp | ksync | kasync) server=(--server-rank); world=3 ;; *) server=(); world=2 ;; esac
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$H" calib --device cpu --model "$MODEL" --db "$T/c.db" >/dev/null 2>&1
# CONCURRENT=2: also the steps timed while 2 nets step at once ("NAME (2 workers)"), which
# validate then takes for the runs' compute and its spread.
[ "${CONCURRENT:-1}" = 1 ] ||
  "$H" calib --device cpu --model "$MODEL" --db "$T/c.db" --concurrent "$CONCURRENT" --no-comm >/dev/null 2>&1
cp "$T/c.db" "$T/c0.db"
port=$((21000 + ($$ % 500) * 8))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 300 "$H" calib --device cpu --model "$MODEL" \
    --db "$T/c.db" >"$T/cal.$r" 2>&1 &
done
wait
job=(--model "$MODEL" --global-batch 64 --workers 2 --train-samples 5000 --eval-samples 300 --policy "$POLICY"
     --iterations "$ITER" --db "$T/r.db" --json)
printf "kind\trep\treal_comm_ms\tsim_comm_ms\tmean_iter_error\ttotal_time_error\tcomm_backend\tallreduce_ms\tp2p_ms\tmessage_us\twake_us\n"
line() { # KIND REP RUN_ID [CALIB]
  one "$H" "$@"
  # OLD=HETSIM2 (another build, e.g. the one before a change): the same run validated by it too
  [ -z "${OLD:-}" ] || one "$OLD" "$1_old" "${@:2}"
}
one() { # HETSIM KIND REP RUN_ID [CALIB]
  local h=$1; shift
  "$h" validate "$3" --db "$T/r.db" --calib "${4:-$T/c.db}" --json | python3 -c 'import json, sys
v = json.load(sys.stdin)
us = lambda x: "-" if x is None else "%.1f" % (1e6 * x)
print("%s\t%s\t%.4f\t%.4f\t%+.4f\t%+.4f\t%s\t%.4f\t%.4f\t%s\t%s" % (sys.argv[1], sys.argv[2], 1e3 * v["real_step"]["comm_s"],
      1e3 * v["sim_step"]["comm_s"], v["mean_iter_error"], v["total_time_error"], v["comm_backend"],
      1e3 * v["allreduce_s"], 1e3 * v["p2p_s"], us(v["rank_message_s"]), us(v["wake_s"])))' "$1" "$2"
}
for rep in $(seq 1 "$REPS"); do
  port=$((port + 2))
  for r in $(seq 0 $((world - 1))); do
    RANK=$r WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 300 "$H" real "${job[@]}" \
      ${server[@]+"${server[@]}"} >"$T/out.$r" 2>"$T/err.$r" &
  done
  wait
  id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out.0")
  line ranks "$rep" "$id"
  line ranks_uncal "$rep" "$id" "$T/c0.db"
  "$H" real "${job[@]}" >"$T/out.thr" 2>"$T/err.thr"
  line threads "$rep" "$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out.thr")"
done
