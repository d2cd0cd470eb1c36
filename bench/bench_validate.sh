#!/usr/bin/env bash
# Validation on the cpu backend (docs/performance.md, "Validation on the cpu backend"): runs the
# documented protocol on a fresh database per repeat -- calib, calib --concurrent 2, then
# `hetsim real` + `hetsim validate` for ssgd, lbb and asp -- and prints one table: the median
# over the repeats of each policy's median and p95 per-iteration error, time-to-final-loss
# error, and the ratio of the simulated to the real mean time per iteration (over the versions
# both runs saw; 1 = unbiased), then where a real iteration's time goes (from the stored step
# rows: compute, communication, and the gap from a step's end to the worker's next start), and
# validate's compute_ratio (the runs' computes over the calibration's: the machine's drift).
# Usage: bench/bench_validate.sh BUILD_DIR [REPEATS]     (REPEATS defaults to 3)
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
POLICIES="ssgd lbb asp"
json_field() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print("nan" if v is None else v)' "$1" "$2"; }

echo "bench_validate: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$REPS"); do
  db=$T/v$rep.db
  C="--model mlp --batches ${BATCHES:-16,32,48,64,96,128} --db $db --min-reps 20 --max-reps 100 --warmup 5"
  "$H" calib --device cpu $C >"$T/calib.out"
  "$H" calib --device cpu $C --concurrent 2 >"$T/calib2.out"
  for p in $POLICIES; do
    "$H" real --backend cpu --model mlp --policy $p --global-batch 128 --iterations 200 --workers 2 \
      --train-samples 6000 --eval-samples 500 --eval-every 20 --db "$db" --calib "$db" --json >"$T/real.json"
    id=$(json_field "$T/real.json" run_id)
    "$H" validate "$id" --db "$db" --window 10 --json >"$T/val.json"
    sim=$(json_field "$T/val.json" sim_run_id)
    # Mean time per iteration over the versions both runs saw: T_v is a version's first step start.
    ratio=$(sqlite3 "$db" "WITH r AS (SELECT model_version v, min(start_s) t FROM step WHERE run_id = $id GROUP BY 1),
      s AS (SELECT model_version v, min(start_s) t FROM step WHERE run_id = $sim GROUP BY 1),
      b AS (SELECT r.v, r.t rt, s.t st FROM r JOIN s ON r.v = s.v)
      SELECT printf('%.4f', ((SELECT st FROM b ORDER BY v DESC LIMIT 1) - (SELECT st FROM b ORDER BY v LIMIT 1)) /
                            ((SELECT rt FROM b ORDER BY v DESC LIMIT 1) - (SELECT rt FROM b ORDER BY v LIMIT 1)))")
    parts() { sqlite3 "$db" "WITH x AS (SELECT compute_end_s - start_s c, comm_end_s - compute_end_s m,
        lead(start_s) OVER (PARTITION BY worker ORDER BY step) - comm_end_s g FROM step WHERE run_id = $1)
        SELECT printf('%.3f %.3f %.3f', 1e3 * avg(c), 1e3 * avg(m), 1e3 * avg(g)) FROM x WHERE g IS NOT NULL"; }
    echo "$p $rep $(json_field "$T/val.json" median_iter_error) $(json_field "$T/val.json" p95_iter_error)" \
      "$(json_field "$T/val.json" time_to_loss_error) $ratio $(parts "$id") $(parts "$sim")" \
      "$(json_field "$T/val.json" compute_ratio)" >>"$T/rows"
  done
  rm -f "$db"*
done

python3 - "$T/rows" <<'EOF'
import math, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(xs):
    xs = [float(x) for x in xs if x != "nan" and not math.isnan(float(x))]
    return statistics.median(xs) if xs else float("nan")
print("\nper repeat: policy rep median p95 ttl sim/real | real compute comm gap ms | sim compute comm gap ms"
      " | real compute / calibrated")
for r in rows: print("  " + " ".join(r[:6]) + " | " + " ".join(r[6:9]) + " | " + " ".join(r[9:12]) + " | " + r[12])
print("\nmedians over %d repeat(s):" % len(set(r[1] for r in rows)))
print("| policy | median iter. error | p95 iter. error | time-to-final-loss error | sim/real mean iteration |"
      " real compute / comm / gap (ms) | sim compute / comm / gap (ms) | real compute / calibrated |")
print("|---|---|---|---|---|---|---|---|")
for p in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == p]
    c = [med([r[i] for r in rs]) for i in range(2, 13)]
    print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2f |" % (p, *c))
EOF
