#!/usr/bin/env bash
# Validation on the cpu backend (docs/performance.md, "Validation on the cpu backend"): runs the
# documented protocol on a fresh database per repeat -- calib, calib --concurrent 2, then
# `hetsim real` + `hetsim validate` for ssgd, lbb and asp -- and prints one table: the median
# over the repeats of each policy's median and p95 per-iteration error, time-to-final-loss
# error, and the ratio of the simulated to the real mean time per iteration (over the versions
# both runs saw; 1 = unbiased), then where a real and a simulated step spend their time (validate's
# real_step and sim_step: compute, communication, and the gap to the worker's next start), and
# validate's compute_ratio (the runs' computes over the calibration's: the machine's drift).
# The floor under those errors: each run is made twice in a row (same seed), and the second
# is scored against the first with validate's per-iteration error (`validate --against`):
# how far this machine reproduces its own rounds, which no prediction of it can
# beat. Also per repeat: the seconds of CPU time the hypervisor stole (/proc/stat, both CPUs).
# Usage: bench/bench_validate.sh BUILD_DIR [REPEATS]     (REPEATS defaults to 3)
# CLUSTER (environment), a cluster file of 2 workers, replaces `--workers 2` (e.g. one with a
# slowdown event, for a heterogeneous scenario: docs/performance.md).
# KEEP (environment), a directory: each repeat's database is kept there as repN.db (vacuumed)
# instead of deleted: calibrations, real runs, their simulations and the validation rows.
# MODEL, GLOBAL_BATCH, ITERATIONS, TRAIN_SAMPLES (environment) replace mlp, 128, 200 and 6000:
# e.g. MODEL=cnn GLOBAL_BATCH=384 BATCHES=64,128,160,192,224,256,320 for steps of 20 ms and
# more (docs/performance.md, "Validation at training-sized steps").
# CONCURRENT and COMM_WORLD (environment) replace the 2 of `calib --concurrent 2` and the
# all-reduce's default 2 participants (`calib --comm-world`): e.g. 3 and 3 for a cluster of 3
# workers (docs/performance.md, "CPU sharing").
# BATCHES (environment) replaces the calibrated batch sizes, 16,32,48,64,96,128: e.g.
# BATCHES=16,32,$(seq -s, 40 90),96,128 times every batch lbb picks around 64 (the simulator
# takes a measured batch's own time, docs/performance.md, "Batch sizes the kernels do not tile").
set -eu
B=${1:?usage: bench_validate.sh BUILD_DIR [REPEATS]}
REPS=${2:-3}
H=$B/hetsim
[ -x "$H" ] || { echo "bench_validate: no $H (build first)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
POLICIES=${POLICIES:-ssgd lbb asp}
MODEL=${MODEL:-mlp}
GB=${GLOBAL_BATCH:-128}
ITERS=${ITERATIONS:-200}
TRAIN=${TRAIN_SAMPLES:-6000}
WORKERS="--workers 2"
if [ -n "${CLUSTER:-}" ]; then
  [ -r "$CLUSTER" ] || { echo "bench_validate: cannot read CLUSTER=$CLUSTER" >&2; exit 2; }
  WORKERS="--cluster $(realpath "$CLUSTER")"
fi
json_field() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print("nan" if v is None else v)' "$1" "$2"; }

echo "bench_validate: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "model $MODEL, global batch $GB, $ITERS iterations, batches ${BATCHES:-16,32,48,64,96,128}"
steal() { awk '/^cpu / { print $9 }' /proc/stat; }
for rep in $(seq 1 "$REPS"); do
  s0=$(steal)
  db=$T/v$rep.db
  C="--model $MODEL --batches ${BATCHES:-16,32,48,64,96,128} --db $db --min-reps 20 --max-reps 100 --warmup 5"
  "$H" calib --device cpu $C ${COMM_WORLD:+--comm-world "$COMM_WORLD"} >"$T/calib.out"
  "$H" calib --device cpu $C --concurrent "${CONCURRENT:-2}" ${COMM_WORLD:+--comm-world "$COMM_WORLD"} >"$T/calib2.out"
  for p in $POLICIES; do
    for k in 1 2; do
      "$H" real --backend cpu --model "$MODEL" --policy $p --global-batch "$GB" --iterations "$ITERS" $WORKERS \
        --train-samples "$TRAIN" --eval-samples 500 --eval-every 20 --db "$db" --calib "$db" --json >"$T/real$k.json"
    done
    id=$(json_field "$T/real1.json" run_id)
    "$H" validate "$id" --db "$db" --window 10 --against "$(json_field "$T/real2.json" run_id)" --json >"$T/val.json"
    sim=$(json_field "$T/val.json" sim_run_id)
    # Mean time per iteration over the versions both runs saw: T_v is a version's first step start.
    ratio=$(sqlite3 "$db" "WITH r AS (SELECT model_version v, min(start_s) t FROM step WHERE run_id = $id GROUP BY 1),
      s AS (SELECT model_version v, min(start_s) t FROM step WHERE run_id = $sim GROUP BY 1),
      b AS (SELECT r.v, r.t rt, s.t st FROM r JOIN s ON r.v = s.v)
      SELECT printf('%.4f', ((SELECT st FROM b ORDER BY v DESC LIMIT 1) - (SELECT st FROM b ORDER BY v LIMIT 1)) /
                            ((SELECT rt FROM b ORDER BY v DESC LIMIT 1) - (SELECT rt FROM b ORDER BY v LIMIT 1)))")
    # validate's real_step and sim_step: mean compute, communication and idle time per step.
    parts() { python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))[sys.argv[2]]
print(" ".join("%.3f" % (1e3 * p[k]) for k in ("compute_s", "comm_s", "idle_s")))' "$T/val.json" "$1"; }
    echo "$p $rep $(json_field "$T/val.json" median_iter_error) $(json_field "$T/val.json" p95_iter_error)" \
      "$(json_field "$T/val.json" time_to_loss_error) $ratio $(parts real_step) $(parts sim_step)" \
      "$(json_field "$T/val.json" compute_ratio)" \
      "$(json_field "$T/val.json" against_median_iter_error) $(json_field "$T/val.json" against_p95_iter_error)" \
      "$(( $(steal) - s0 ))" \
      "$(json_field "$T/val.json" mean_iter_error) $(json_field "$T/val.json" total_time_error)" \
      "$(json_field "$T/val.json" iter_wasserstein) $(json_field "$T/val.json" against_mean_iter_error)" \
      "$(json_field "$T/val.json" against_total_time_error) $(json_field "$T/val.json" against_iter_wasserstein)" \
      "$(json_field "$T/val.json" real_mean_iter_s)" >>"$T/rows"
  done
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    rm -f "$KEEP/rep$rep.db"
    sqlite3 "$db" "VACUUM INTO '$KEEP/rep$rep.db'"
  fi
  rm -f "$db"*
done

python3 - "$T/rows" <<'EOF'
import math, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(xs):
    xs = [float(x) for x in xs if x != "nan" and not math.isnan(float(x))]
    return statistics.median(xs) if xs else float("nan")
print("\nper repeat: policy rep median p95 ttl sim/real | real compute comm gap ms | sim compute comm gap ms"
      " | real compute / calibrated | rerun median p95 | stolen s (so far in the repeat)")
for r in rows: print("  " + " ".join(r[:6]) + " | " + " ".join(r[6:9]) + " | " + " ".join(r[9:12]) + " | " + r[12]
                     + " | " + " ".join(r[13:15]) + " | %.2f" % (int(r[15]) / 100))
print("\nper repeat: policy rep real mean iteration ms | sim: mean error, total error, distance | rerun: mean error, total error, distance")
for r in rows: print("  %s %s %.2f | %s %s %s | %s %s %s" % (r[0], r[1], 1e3 * float(r[22]), *r[16:22]))
print("\nmedians over %d repeat(s):" % len(set(r[1] for r in rows)))
print("| policy | median iter. error | p95 iter. error | time-to-final-loss error | sim/real mean iteration |"
      " real compute / comm / gap (ms) | sim compute / comm / gap (ms) | real compute / calibrated |"
      " rerun median / p95 error |")
print("|---|---|---|---|---|---|---|---|---|")
for p in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == p]
    c = [med([r[i] for r in rs]) for i in range(2, 15)]
    print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2f | %.2f / %.2f |" % (p, *c))
# Signed errors: the median of their sizes, then the signed median (in parentheses).
def absmed(xs):
    return med([abs(float(x)) for x in xs if x != "nan"])
print("\n| policy | real mean iteration (ms) | mean iteration error, median abs. (signed) | total time error, median abs. (signed) |"
      " iteration-time distance (W1 / real mean) | rerun: mean iteration error | rerun: total time error | rerun: distance |")
print("|---|---|---|---|---|---|---|---|")
for p in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == p]
    col = lambda i: [r[i] for r in rs]
    print("| %s | %.1f | %.3f (%+.3f) | %.3f (%+.3f) | %.3f | %.3f (%+.3f) | %.3f (%+.3f) | %.3f |" % (
        p, 1e3 * med(col(22)), absmed(col(16)), med(col(16)), absmed(col(17)), med(col(17)), med(col(18)),
        absmed(col(19)), med(col(19)), absmed(col(20)), med(col(20)), med(col(21))))
EOF
