#!/usr/bin/env bash
# hetsim validate on a cpu run: a quick cpu calibration of mlp, a real run on the cpu backend,
# then validate: a simulated run is stored, a validation row is written, and the JSON carries
# the errors; validate uses the steps timed alone until a calibration with 2 concurrent workers
# (calib --concurrent 2) exists, then that one. The errors' size depends on the machine's load,
# so it is reported, not asserted.
# usage: cli_validate.sh HETSIM_BINARY SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP # the short names this script uses
DB="$T/v.db"
cd "$T"
fashion_mnist_or_synthetic

expect_exit calib 0 "$H" calib --device cpu --model mlp --batches 8,16,32,48 --db "$T/v.db" \
  --max-reps 6 --min-reps 3 --warmup 1 --comm-max 256KiB
expect_exit real 0 "$H" real --policy ssgd --model mlp --global-batch 32 --iterations 30 --workers 2 \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate 0 "$H" validate "${id:-0}" --db "$T/v.db" --json
cat "$T/out"
for k in run_id sim_run_id median_iter_error p95_iter_error time_to_loss_error mean_iter_error \
    total_time_error iter_wasserstein; do
  check "validate_json_$k" grep -q "\"$k\":" "$T/out"
done
check validate_json_not_reused grep -q '"reused": false' "$T/out"
check validate_sync_round grep -q '"versions_per_interval": 1,' "$T/out"
cp "$T/out" "$T/first.json"
# The errors recomputed here from the step rows and summaries: over the intervals of one round
# (consecutive versions both runs saw), the simulated mean time per iteration over the real
# one, the Wasserstein-1 distance between the two lists of per-iteration times (sorted, equal
# counts: the mean distance between the sorted values) over the real mean, the totals; and the
# same figures in the validation row.
metrics_ok() { # DB OUT_JSON REF_RUN CMP_RUN PREFIX (PREFIX "" for the simulation, "against_")
  python3 - "$@" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = json.load(open(sys.argv[2]))
ref, cmp, pre = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def times(run):
    return dict(db.execute("SELECT model_version, min(start_s) FROM step WHERE run_id = ? GROUP BY 1", (run,)))
a, b = times(ref), times(cmp)
vs = sorted(set(a) & set(b))
pairs = [((a[w] - a[v]) / (w - v), (b[w] - b[v]) / (w - v)) for v, w in zip(vs, vs[1:])]
pairs = [(r, s) for r, s in pairs if r > 0]
rs, ss = [r for r, _ in pairs], [s for _, s in pairs]
rm = sum(rs) / len(rs)
mean_err = (sum(ss) / len(ss)) / rm - 1
w = sum(abs(x - y) for x, y in zip(sorted(rs), sorted(ss))) / len(rs) / rm
def total(run):
    return db.execute("SELECT sim_time_s FROM summary WHERE run_id = ?", (run,)).fetchone()[0]
tot = total(cmp) / total(ref) - 1
got = (out[pre + "mean_iter_error"], out[pre + "iter_wasserstein"], out[pre + "total_time_error"])
ok = len(pairs) > 10 and all(abs(g - e) <= 1e-9 * (1 + abs(e)) for g, e in zip(got, (mean_err, w, tot)))
if pre == "":
    row = db.execute("SELECT mean_iter_error, iter_wasserstein, total_time_error, median_iter_error, p95_iter_error,"
                     " time_to_loss_error FROM validation WHERE id = ?", (out["validation_id"],)).fetchone()
    want = got + (out["median_iter_error"], out["p95_iter_error"], out["time_to_loss_error"])
    ok = ok and all((x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-12 * (1 + abs(y)))
                    for x, y in zip(row, want))
    # The simulation covers the real run's iterations exactly.
    its = db.execute("SELECT count(DISTINCT iterations) FROM summary WHERE run_id IN (?, ?)", (ref, cmp)).fetchone()[0]
    ok = ok and its == 1 and abs(out["sim_total_s"] - total(cmp)) <= 1e-12 and abs(out["real_total_s"] - total(ref)) <= 1e-12
if not ok:
    print("metrics:", got, (mean_err, w, tot), len(pairs), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}
first_sim=$(sed -n 's/.*"sim_run_id": \([0-9]*\).*/\1/p' "$T/out")
check validate_metrics metrics_ok "$T/v.db" "$T/out" "${id:-0}" "${first_sim:-0}" ""
# The run's computes against the calibration's: a positive ratio (the machine's speed may
# differ, so no bound but sanity).
# Where the steps' time went, real and simulated: means that agree with the step rows.
parts_ok() {
  python3 - "$T/v.db" "$T/out" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = json.load(open(sys.argv[2]))
def parts(run):
    rows = db.execute("SELECT worker, step, start_s, compute_end_s, comm_end_s FROM step WHERE run_id = ?"
                      " ORDER BY worker, step", (run,)).fetchall()
    c, m, g = [], [], []
    for a, b in zip(rows, rows[1:]):
        if a[0] != b[0]: continue
        c.append(a[3] - a[2]); m.append(a[4] - a[3]); g.append(b[2] - a[4])
    return [sum(x) / len(x) for x in (c, m, g)]
ok = True
for key, run in (("real_step", out["run_id"]), ("sim_step", out["sim_run_id"])):
    want, got = parts(run), out[key]
    ok = ok and got["compute_s"] > 0 and all(abs(got[k] - w) <= 1e-9 + 1e-6 * abs(w)
                                             for k, w in zip(("compute_s", "comm_s", "idle_s"), want))
sys.exit(0 if ok else 1)
PY
}
check validate_step_parts parts_ok
# How stale the updates were: ssgd's are never stale, in either run.
check validate_staleness_sync python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["real_mean_staleness"] == 0 and d["sim_mean_staleness"] == 0, d' "$T/out"
# (ratio_ok: for the validation in $T/out, of a run at 16 samples per worker.)
# It is null only when the calibrated step at the run's batch (16 per worker, measured) is no
# longer than the update it includes: so in a sanitizer build, whose instrumented update loop
# takes as long as a whole step of the uninstrumented BLAS.
ratio_ok() {
  python3 - "$T/v.db" "$T/out" <<'PY'
import json, sqlite3, sys
out = json.load(open(sys.argv[2]))
step = sqlite3.connect(sys.argv[1]).execute(
    "SELECT median_s FROM calib_sample JOIN device ON device.id = device_id WHERE phase = 'step' AND batch = 16"
    " AND model = 'mlp' AND device.name = ? ORDER BY calib_sample.id DESC LIMIT 1", (out["compute_calibration"],)).fetchone()[0]
r = out["compute_ratio"]
# Null exactly when the calibrated step is no longer than its update; otherwise a positive
# ratio of two timings (no band: under ASan with another test beside it the two drift apart).
ok = (r is None) == (step <= out["update_s"]) and (r is None or 0 < r < float("inf"))
if not ok:
    print(f"compute_ratio {r}, calibrated step {step}, update {out['update_s']}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}
check validate_compute_ratio ratio_ok
check validate_row test "$(q "SELECT count(*) FROM validation WHERE run_id = ${id:-0} AND median_iter_error >= 0
    AND p95_iter_error >= median_iter_error")" = 1
check validate_sim_run test "$(q "SELECT kind || ' ' || status || ' ' || policy FROM run WHERE id = (SELECT sim_run_id FROM validation)")" = "sim complete ssgd"
check validate_sim_steps test "$(q "SELECT count(*) > 0 FROM step WHERE run_id = (SELECT sim_run_id FROM validation)")" = 1
expect_exit validate_text 0 "$H" validate "${id:-0}" --db "$T/v.db"
check validate_text_says grep -q "per-iteration time error" "$T/out"
check validate_text_parts grep -q "per step, real / simulated compute [0-9.]* / [0-9.]* ms, communication" "$T/out"
check validate_text_wake grep -q "thread hand-off  *[0-9.e-]* ms each, 3 per all-reduce" "$T/out"
check validate_text_new_metrics grep -q "mean iteration time  *real [0-9.e+-]* ms, simulated [0-9.e+-]* ms: error [-+][0-9.]*" "$T/out"
check validate_text_total grep -q "total time  *real [0-9.e+-]* s, simulated [0-9.e+-]* s: error [-+][0-9.]* (30 iterations" "$T/out"
check validate_text_distance grep -q "iteration-time distance  *[0-9.]* of the real mean" "$T/out"
# The same question again (the text after the JSON, the JSON once more) reuses the stored
# simulation and validation: no second simulated run or row, the same answer, and it says so.
check validate_reused_text grep -q "^validation 1 of real run ${id:-0} .*simulated as run ${first_sim:-0} (reused" "$T/out"
check validate_one_row test "$(q "SELECT count(*) FROM validation")" = 1
check validate_one_sim_run test "$(q "SELECT count(*) FROM run WHERE kind = 'sim'")" = 1
expect_exit validate_again_json 0 "$H" validate "${id:-0}" --db "$T/v.db" --json
check validate_reused_json grep -q '"reused": true' "$T/out"
same_answer() {
  python3 - "$T/first.json" "$T/out" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
keys = ("sim_run_id", "validation_id", "median_iter_error", "p95_iter_error", "mean_iter_error", "total_time_error",
        "iter_wasserstein", "time_to_loss_error", "sim_time_to_loss_s", "sim_total_s", "intervals")
sys.exit(0 if all(a[k] == b[k] for k in keys) else 1)
PY
}
check validate_reused_same_answer same_answer
check validate_still_one_row test "$(q "SELECT count(*) FROM validation")" = 1
expect_exit validate_alone 0 "$H" validate "${id:-0}" --db "$T/v.db" --json
alone_calibration() { grep -q '"compute_calibration":' "$T/out" && ! grep -q '"compute_calibration": ".* workers)"' "$T/out"; }
check validate_alone_calibration alone_calibration
# The runtime's update of its global model is the calibrated update phase: the median over the
# 4 timed batch sizes (the mean of the middle two).
want_upd=$(q "SELECT avg(median_s) FROM (SELECT median_s FROM calib_sample WHERE phase = 'update' AND model = 'mlp'
    ORDER BY median_s LIMIT 2 OFFSET 1)")
got_upd=$(sed -n 's/.*"update_s": \([-0-9.eE+]*\).*/\1/p' "$T/out")
check validate_update_calibrated awk -v a="${got_upd:-nan}" -v b="${want_upd:-0}" \
  'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-9 * b) }'
# The simulated steps' jitter: a lognormal through the calibrated steps' 10th and 90th
# percentiles, the median sigma over the batch sizes, as a coefficient of variation.
jitter_ok() {
  python3 - "$T/v.db" "$T/out" <<'PY'
import json, math, sqlite3, statistics, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "SELECT p10_s, p90_s FROM calib_sample JOIN device ON device.id = device_id "
    "WHERE phase = 'step' AND model = 'mlp' AND device.name NOT LIKE '% workers)'").fetchall()
s = statistics.median(math.log(p90 / p10) / (2 * 1.2815515655446004) for p10, p90 in rows)
want, got = math.sqrt(math.expm1(s * s)), json.load(open(sys.argv[2]))["jitter_cv"]
sys.exit(0 if len(rows) == 4 and abs(got - want) <= 1e-9 * max(want, 1e-12) else 1)
PY
}
check validate_jitter_calibrated jitter_ok
# Communication at the run's message size (mlp's 814,120-byte gradient): the measured times
# interpolated log-log between the two calibrated sizes around it, or extrapolated from the
# last two (this calibration stops at 256 KiB).
comm_ok() {
  python3 - "$T/v.db" "$T/out" <<'PY'
import json, math, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = json.load(open(sys.argv[2]))
m = out["message_bytes"]
def at(op, world):
    rows = db.execute("SELECT bytes, median_s FROM comm_sample JOIN device ON device.id = device_id "
                      "WHERE op = ? AND world_size = ? AND device.name NOT LIKE '% workers)' "
                      "ORDER BY bytes", (op, world)).fetchall()
    i = 0
    while i < len(rows) - 2 and rows[i + 1][0] < m:
        i += 1
    (b0, t0), (b1, t1) = rows[i], rows[i + 1]
    return t0 * math.exp(math.log(t1 / t0) / math.log(b1 / b0) * math.log(m / b0))
ok = m == 814120 and all(abs(out[k] - at(op, w)) <= 1e-6 * at(op, w)
                         for k, op, w in (("allreduce_s", "allreduce", 2), ("p2p_s", "p2p", 2)))
sys.exit(0 if ok else 1)
PY
}
check validate_comm_at_size comm_ok
# The runtime's hand-offs: the device's calibrated wake-up latency, reported as wake_s.
wake_ok() {
  python3 - "$T/v.db" "$T/out" <<'PY'
import json, sqlite3, sys
want = sqlite3.connect(sys.argv[1]).execute(
    "SELECT median_s FROM comm_sample JOIN device ON device.id = device_id WHERE op = 'wake' "
    "AND device.name NOT LIKE '% workers)' ORDER BY comm_sample.id DESC LIMIT 1").fetchone()[0]
sys.exit(0 if want > 0 and json.load(open(sys.argv[2]))["wake_s"] == want else 1)
PY
}
check validate_wake_calibrated wake_ok
# Without the sample (a calibration from before it) nothing is added: wake_s is null, and every
# simulated round of the same seed is three wake-ups shorter.
sim_with=$(q "SELECT sim_run_id FROM validation ORDER BY id DESC LIMIT 1")
wake_rows=$(q "SELECT count(*) FROM comm_sample WHERE op = 'wake'")
sqlite3 "$DB" "CREATE TABLE saved_wake AS SELECT * FROM comm_sample WHERE op = 'wake'; DELETE FROM comm_sample WHERE op = 'wake'"
expect_exit validate_no_wake 0 "$H" validate "${id:-0}" --db "$T/v.db" --json
check validate_no_wake_null grep -q '"wake_s": null' "$T/out"
check validate_no_wake_new_sim grep -q '"reused": false' "$T/out"  # another calibration: another question
sim_without=$(q "SELECT sim_run_id FROM validation ORDER BY id DESC LIMIT 1")
rounds_ok() {
  python3 - "$DB" "$sim_with" "$sim_without" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
w = db.execute("SELECT median_s FROM saved_wake ORDER BY id DESC LIMIT 1").fetchone()[0]
def starts(run):
    return dict(db.execute("SELECT model_version, min(start_s) FROM step WHERE run_id = ? GROUP BY 1", (run,)))
a, b = starts(int(sys.argv[2])), starts(int(sys.argv[3]))
vs = sorted(set(a) & set(b))
ok = len(vs) > 10 and all(abs((a[v] - b[v]) - 3 * w * v) <= 1e-9 * (1 + v) for v in vs)
sys.exit(0 if ok else 1)
PY
}
check validate_wake_per_round rounds_ok
sqlite3 "$DB" "INSERT INTO comm_sample SELECT * FROM saved_wake; DROP TABLE saved_wake"
check validate_wake_restored test "$(q "SELECT count(*) FROM comm_sample WHERE op = 'wake'")" = "$wake_rows"
expect_exit validate_restored 0 "$H" validate "${id:-0}" --db "$T/v.db" --json
check validate_restored_reuses grep -q "\"sim_run_id\": ${first_sim:-0},\$" "$T/out"
# The simulated run's summary keeps its time to the real run's final loss.
ttl_stored() {
  python3 - "$T/v.db" "$T/first.json" <<'PY'
import json, sqlite3, sys
out = json.load(open(sys.argv[2]))
got = sqlite3.connect(sys.argv[1]).execute("SELECT time_to_target_s FROM summary WHERE run_id = ?",
                                           (out["sim_run_id"],)).fetchone()[0]
sys.exit(0 if got is not None and got == out["sim_time_to_loss_s"] else 1)
PY
}
check validate_sim_ttl_stored ttl_stored

# With the steps also timed as 2 concurrent workers, validate takes that calibration.
expect_exit calib_concurrent 0 "$H" calib --device cpu --model mlp --batches 8,16,32,48 --db "$T/v.db" \
  --max-reps 6 --min-reps 3 --warmup 1 --comm-max 256KiB --concurrent 2
check calib_concurrent_device test "$(q "SELECT count(*) FROM device WHERE name LIKE '% (2 workers)'")" = 1
check calib_concurrent_fit test "$(q "SELECT count(*) FROM perf_model JOIN device ON device.id = perf_model.device_id
    WHERE device.name LIKE '% (2 workers)' AND phase = 'step' AND chosen = 1")" = 1
# Concurrent points: the median of block means, the 10th/90th percentiles of single steps (on a
# loaded machine a block mean, preemptions included, may lie above the single steps' p90).
check calib_concurrent_spread test "$(q "SELECT count(*) > 0 AND sum(p10_s > 0 AND p10_s <= p90_s AND p90_s < 1) = count(*)
  FROM calib_sample JOIN device ON device.id = calib_sample.device_id WHERE device.name LIKE '% (2 workers)'")" = 1
expect_exit validate_concurrent 0 "$H" validate "${id:-0}" --db "$T/v.db" --json
cat "$T/out"
check validate_concurrent_calibration grep -q '"compute_calibration": ".* (2 workers)"' "$T/out"
expect_exit calib_concurrent_bad 2 "$H" calib --device cpu --model mlp --db "$T/v.db" --concurrent 0

# A run with a cluster file: compute_ratio counts the workers it never slows (worker 0 here),
# and is null once every worker is slowed.
slow_cluster slow.yaml
expect_exit real_slow 0 "$H" real --policy ssgd --model mlp --global-batch 32 --iterations 20 --cluster slow.yaml \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
sid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_slow 0 "$H" validate "${sid:-0}" --db "$T/v.db" --json
check validate_slow_compute_ratio ratio_ok
sed 's/  - {at: 0s, worker: 1, slowdown: 3.0}/&\n  - {at: 0s, worker: 0, slowdown: 1.5}/' slow.yaml > slow2.yaml
expect_exit real_slow2 0 "$H" real --policy ssgd --model mlp --global-batch 32 --iterations 10 --cluster slow2.yaml \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
sid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_slow2 0 "$H" validate "${sid:-0}" --db "$T/v.db" --json
check validate_all_slowed_no_ratio grep -q '"compute_ratio": null' "$T/out"
# A run in which a worker joins (the threads run joins since 2026-11-29): the simulation replays
# the join, so its worker 2 too first computes after 20 ms, and the errors are numbers.
events_cluster join.yaml join 2 "{at: 0.02s, join: {type: c, node: n0}}"
expect_exit real_join 0 "$H" real --policy ssgd --model mlp --global-batch 48 --iterations 200 --cluster join.yaml \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
jid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_join 0 "$H" validate "${jid:-0}" --db "$T/v.db" --json
jsim=$(sed -n 's/.*"sim_run_id": \([0-9]*\).*/\1/p' "$T/out")
check validate_join_errors python3 -c 'import json,math,sys; d=json.load(open(sys.argv[1]))
assert all(math.isfinite(d[k]) for k in ("median_iter_error", "mean_iter_error", "total_time_error")), d' "$T/out"
check validate_join_simulated test "$(q "SELECT min(start_s) >= 0.02 AND count(*) > 0 FROM step
  WHERE run_id = ${jsim:-0} AND worker = 2")" = 1
# What the workers shared (since 2026-11-29): the run records the CPUs it could use, and validate
# says when its worker threads were more (here 2 threads held to 1 CPU by taskset), and over how
# many participants the all-reduce it took was timed (the calibration's 2, for a run of 3).
cpus_here=$(nproc)
check validate_join_cpus python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["cpus"] == int(sys.argv[2]) and d["cpu_sharers"] == 3, d' "$T/out" "$cpus_here"
expect_exit real_one_cpu 0 taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')" "$H" real --policy ssgd \
  --model mlp --global-batch 32 --iterations 10 --workers 2 --train-samples 1500 --eval-samples 300 --db "$T/v.db" --json
oid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
check real_options_cpus test "$(q "SELECT json_extract(options, '$.cpus') FROM run WHERE id = ${oid:-0}")" = 1
expect_exit validate_one_cpu 0 "$H" validate "${oid:-0}" --db "$T/v.db"
check validate_one_cpu_says grep -q "CPU sharing  *2 worker threads on 1 CPU: simulated as 1 compute slot, a step waiting for one when all are taken" "$T/out"
expect_exit validate_one_cpu_json 0 "$H" validate "${oid:-0}" --db "$T/v.db" --json
check validate_one_cpu_json_says grep -q '"cpu_sharers": 2,' "$T/out"
osim=$(sed -n 's/.*"sim_run_id": \([0-9]*\).*/\1/p' "$T/out")
# One compute slot: the simulated workers' steps never compute at the same time.
check validate_one_cpu_one_at_once test "$(q "SELECT count(*) FROM step a JOIN step b ON a.run_id = b.run_id
  AND a.worker < b.worker AND a.start_s < b.compute_end_s - 1e-12 AND b.start_s < a.compute_end_s - 1e-12
  WHERE a.run_id = ${osim:-0}")" = 0
check validate_one_cpu_steps test "$(q "SELECT count(*) >= 18 FROM step WHERE run_id = ${osim:-0}")" = 1
expect_exit validate_two_text 0 "$H" validate "${id:-0}" --db "$T/v.db"
check validate_two_not_crowded bash -c '[ "$2" -lt 2 ] || ! grep -q "CPU sharing" "$1"' _ "$T/out" "$cpus_here"
expect_exit real_three 0 "$H" real --policy ssgd --model mlp --global-batch 48 --iterations 10 --workers 3 \
  --train-samples 1500 --eval-samples 300 --db "$T/v.db" --json
tid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_three 0 "$H" validate "${tid:-0}" --db "$T/v.db"
check validate_three_world_says grep -q "all-reduce of .* (measured at the size over 2 participants, cpu backend; the run had 3: \`hetsim calib --comm-world 3\` times that)" "$T/out"
expect_exit validate_three_json 0 "$H" validate "${tid:-0}" --db "$T/v.db" --json
check validate_three_world_json grep -q '"allreduce_world": 2,' "$T/out"
# A cluster file with per-model compute (a form for mlp, and a default): validate simulates
# with the calibration, not with the file's numbers for mlp (the simulated run would otherwise
# compute 1 s per step).
sed 's/  c: {compute: {t0: 1ms, per_sample: 0.1ms}}/  c: {compute: {mlp: {t0: 1s, per_sample: 0.1s}, default: {flops: 1TFLOPS, efficiency: 0.5}}}/' slow.yaml > slowpm.yaml
check per_model_cluster_written grep -q "mlp: {t0: 1s" slowpm.yaml
expect_exit real_per_model 0 "$H" real --policy ssgd --model mlp --global-batch 32 --iterations 10 --cluster slowpm.yaml \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
sid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_per_model 0 "$H" validate "${sid:-0}" --db "$T/v.db" --json
check validate_per_model_calibrated python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert abs(d["median_iter_error"]) < 5, d' "$T/out"

# --against: the same command run again, scored against the first with the same metric
# (validate's iter_errors over the versions both runs saw, recomputed here).
expect_exit real_again 0 "$H" real --policy ssgd --model mlp --global-batch 32 --iterations 30 --workers 2 \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
again=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_against 0 "$H" validate "${id:-0}" --db "$T/v.db" --against "${again:-0}" --json
against_ok() {
  python3 - "$T/v.db" "$T/out" "${id:-0}" "${again:-0}" <<'PY'
import json, math, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = json.load(open(sys.argv[2]))
def times(run):
    return dict(db.execute("SELECT model_version, min(start_s) FROM step WHERE run_id = ? GROUP BY 1", (run,)))
a, b = times(int(sys.argv[3])), times(int(sys.argv[4]))
vs = sorted(set(a) & set(b))
err = sorted(abs((b[w] - b[v]) - (a[w] - a[v])) / (a[w] - a[v]) for v, w in zip(vs, vs[1:]) if a[w] > a[v])
m = len(err)
med = err[m // 2] if m % 2 else 0.5 * (err[m // 2 - 1] + err[m // 2])
ok = (out["against_run_id"] == int(sys.argv[4]) and out["against_intervals"] == m and m > 10
      and abs(out["against_median_iter_error"] - med) <= 1e-9 and abs(out["against_p95_iter_error"] - err[math.ceil(0.95 * m) - 1]) <= 1e-9)
sys.exit(0 if ok else 1)
PY
}
check validate_against_metric against_ok
check validate_against_new_metrics metrics_ok "$T/v.db" "$T/out" "${id:-0}" "${again:-0}" against_
# Asked again with --against, the simulation is reused (the floor is computed, never stored).
check validate_against_reused grep -q '"reused": true' "$T/out"
expect_exit validate_against_text 0 "$H" validate "${id:-0}" --db "$T/v.db" --against "${again:-0}"
check validate_against_text_says grep -q "real run ${again:-0} against it *median [0-9.]*, p95 [0-9.]* over [0-9]* intervals, mean [-+][0-9.]*, total [-+][0-9.]*, distance [0-9.]*" "$T/out"
expect_exit validate_against_self 2 "$H" validate "${id:-0}" --db "$T/v.db" --against "${id:-0}"
check validate_against_self_says grep -q -- "--against ${id:-0}: run ${id:-0} is RUN_ID itself" "$T/err"
expect_exit validate_against_missing 2 "$H" validate "${id:-0}" --db "$T/v.db" --against 999
check validate_against_missing_says grep -q "run 999 is not in the database" "$T/err"
expect_exit validate_against_sim 2 "$H" validate "${id:-0}" --db "$T/v.db" --against "$(q "SELECT sim_run_id FROM validation LIMIT 1")"
check validate_against_sim_says grep -q "is not a complete real run" "$T/err"
expect_exit validate_against_other 2 "$H" validate "${id:-0}" --db "$T/v.db" --against "${sid:-0}"
check validate_against_other_says grep -q "ran on another cluster file" "$T/err"
expect_exit validate_against_bad 2 "$H" validate "${id:-0}" --db "$T/v.db" --against x

# An asynchronous run: asp's pushes are applied stale, and validate gives both runs' mean
# staleness, each the mean of its step rows. The simulation's is above 0 by construction; the
# real run's usually is, but where the machine serializes the two workers (each computes, pushes
# and pulls while the other waits for a CPU) every push is applied to the model it was computed
# on, and 0 is right: a loaded CI machine gave 0 on 2026-11-29.
expect_exit real_asp 0 "$H" real --policy asp --model mlp --global-batch 32 --iterations 40 --workers 2 \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
asp=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_asp 0 "$H" validate "${asp:-0}" --db "$T/v.db" --json
staleness_ok() {
  python3 - "$T/v.db" "$T/out" <<'PY'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
out = json.load(open(sys.argv[2]))
def mean(run):
    return db.execute("SELECT avg(staleness) FROM step WHERE run_id = ?", (run,)).fetchone()[0]
r, s = out["real_mean_staleness"], out["sim_mean_staleness"]
ok = r >= 0 and s > 0 and abs(r - mean(out["run_id"])) <= 1e-12 and abs(s - mean(out["sim_run_id"])) <= 1e-12
if not ok:
    print(f"staleness: real {r} (rows {mean(out['run_id'])}), simulated {s} (rows {mean(out['sim_run_id'])})", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}
check validate_staleness_async staleness_ok
# A round of asp is N versions (each push makes one), counted over the versions made: the
# distinct versions its steps started from (workers partly in step) made it 1 in some runs.
check validate_asp_round python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["versions_per_interval"] == 2, d["versions_per_interval"]' "$T/out"
# The simulated pushes and pulls go at the measured send/recv's speed: a step's communication is
# at most a push and a pull each shared by both workers, plus two updates (its own and the
# other's, queued before its pull). The ring's all-reduce bandwidth capped them before
# 2026-11-28, which made it twice the bound here.
check validate_asp_comm python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
bound = 4 * (d["p2p_s"] + (d["wake_s"] or 0)) + 2 * d["update_s"]
assert d["sim_step"]["comm_s"] <= bound, (d["sim_step"], bound)' "$T/out"
# The same on a cluster file of two nodes: the real run's workers share this machine whatever
# the file says, so the simulation puts them on one node and its pushes go at the same speed
# (the nodes' network capped them at the ring's bandwidth before).
cat >two.yaml <<'YAML'
name: two-nodes
network: {bandwidth: 1Gbps, latency: 50us}
device_types:
  c: {compute: {t0: 1ms, per_sample: 0.1ms}}
nodes:
  - {name: n0, link: {bandwidth: 8GB/s, latency: 5us}, devices: [{type: c, count: 1}]}
  - {name: n1, link: {bandwidth: 8GB/s, latency: 5us}, devices: [{type: c, count: 1}]}
YAML
expect_exit real_asp_nodes 0 "$H" real --policy asp --model mlp --global-batch 32 --iterations 40 --cluster two.yaml \
  --train-samples 1500 --eval-samples 300 --eval-every 10 --db "$T/v.db" --calib "$T/v.db" --json
aspn=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_asp_nodes 0 "$H" validate "${aspn:-0}" --db "$T/v.db" --json
check validate_asp_nodes_comm python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
bound = 4 * (d["p2p_s"] + (d["wake_s"] or 0)) + 2 * d["update_s"]
assert d["sim_step"]["comm_s"] <= bound, (d["sim_step"], bound)' "$T/out"
expect_exit validate_asp_text 0 "$H" validate "${asp:-0}" --db "$T/v.db"
check validate_asp_text_says grep -q "staleness of the updates   real [0-9.e+-]*, simulated [0-9.e+-]* versions behind" "$T/out"

# A run of a model the proxy cannot train (resnet18: not a Fashion-MNIST model) is validated on
# time alone: it was refused outright ("--convergence proxy trains mlp or cnn"), which would have
# lost every validate of gpu-check's local step.
expect_exit calib_resnet18 0 "$H" calib --device cpu --model resnet18 --batches 1,2,4 --warmup 1 --db "$T/r.db"
expect_exit real_resnet18 0 "$H" real --policy ssgd --model resnet18 --workers 2 --global-batch 4 --iterations 2 \
  --eval-every 1 --eval-samples 8 --train-samples 16 --db "$T/r.db" --calib "$T/r.db" --json
rid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
expect_exit validate_resnet18 0 "$H" validate "${rid:-0}" --db "$T/r.db" --json
check validate_resnet18_time_only python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["final_loss"] is not None and d["sim_time_to_loss_s"] is None and d["total_time_error"] is not None, d' "$T/out"
check validate_resnet18_no_proxy test "$(sqlite3 "$T/r.db" "SELECT count(*) FROM run WHERE kind = 'sim' AND json_extract(options, '$.convergence') = 'none'")" = 1

# Bad input: exit 2 with a clear message.
expect_exit validate_no_run 2 "$H" validate 999 --db "$T/v.db"
check validate_no_run_says grep -q "has no run 999" "$T/err"
sim=$(q "SELECT sim_run_id FROM validation LIMIT 1")
expect_exit validate_sim_run_refused 2 "$H" validate "$sim" --db "$T/v.db"
check validate_sim_run_says grep -q "is a sim run" "$T/err"
expect_exit validate_bad_id 2 "$H" validate abc --db "$T/v.db"
expect_exit validate_no_calib 2 "$H" validate "${id:-0}" --db "$T/v.db" --calib "$T/empty.db"

cli_finish
