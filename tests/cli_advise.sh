#!/usr/bin/env bash
# CLI tests for `hetsim advise`: the refusals before anything runs (exit 2, nothing stored), the
# ranked table and its numbers against the runs in the database, the JSON object's fields,
# resuming (a complete advise runs nothing again; one interrupted run is all that reruns), and
# the report page (time-to-target bars with the seeds' spread, the target on the loss plot).
# Small: three policies, two seeds, mlp's analytic model, runs of about a second of simulated
# time.
# Usage: bash tests/cli_advise.sh /path/to/hetsim /path/to/source-dir
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=advise.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# lbb-4gpu with jitter, so that the seeds differ.
sed 's/jitter: {cv: 0.0}/jitter: {cv: 0.1}/' "$SRC/traces/lbb-4gpu.yaml" > "$TMP/c.yaml"
DB="$TMP/a.db"
# advise's scratch folder (the one-iteration tries, the grid) goes here; none may be left.
mkdir -p "$TMP/scratch"
export TMPDIR="$TMP/scratch"
A=(advise --cluster "$TMP/c.yaml" --model mlp --global-batch 256 --target-loss 0.45
   --policies asp,lbb --seeds 2 --jobs 2 --db "$DB")

# --- refused before anything runs --------------------------------------------------------
run help 0 advise --help && check help.text has out "--target-accuracy A"
check help.listed bash -c "'$HETSIM' --help | grep -q '^  advise '"
run no_target 2 advise --cluster "$TMP/c.yaml" --model mlp --global-batch 256 --db "$DB" &&
  check no_target.msg has err "a target is required"
run beta2 2 advise --cluster "$TMP/c.yaml" --model mlp --global-batch 256 --target-loss 0.3 --db "$DB" &&
  check beta2.msg has err "can never be reached with --convergence analytic: its loss falls towards beta2 = 0.396"
run no_acc_map 2 advise --cluster "$TMP/c.yaml" --model resnet18 --global-batch 256 --target-accuracy 80% --db "$DB" &&
  check no_acc_map.msg has err "no accuracy map for this model"
run acc_max 2 advise --cluster "$TMP/c.yaml" --model mlp --global-batch 256 --target-accuracy 0.9 --db "$DB" &&
  check acc_max.msg has err "acc_max = 0.8571"
run none_applies 2 advise --cluster "$TMP/c.yaml" --model mlp --global-batch 2 --target-loss 0.5 --db "$DB" &&
  check none_applies.msg bash -c "grep -q 'no policy applies' '$TMP/err' && grep -q '  lbb: .*global batch 2 is smaller than the 4' '$TMP/err'"
run bad_policy 2 "${A[@]}" --policies ssgd,nope && check bad_policy.msg has err 'unknown policy "nope"'
run spec_policy 2 "${A[@]}" --policies ssp:s=2 && check spec_policy.msg has err "give policy names only"
run bad_model 2 "${A[@]}" --model nope && check bad_model.msg has err "nope"
run bad_conv 2 "${A[@]}" --convergence bogus && check bad_conv.msg has err "bogus"
run bad_report 2 "${A[@]}" --report "$TMP/nofolder/r.html" && check bad_report.msg has err "no folder"
check nothing_stored test ! -e "$DB"
check no_scratch_left test -z "$(ls "$TMP/scratch")"

# --- the answer ----------------------------------------------------------------------------
run ranked 0 "${A[@]}" --report "$TMP/r.html"
cp "$TMP/out" "$TMP/table"
check ranked.header grep -q '^rank  policy  *parameters  *target (s)  *sd  *min - max  *final loss  *samples/s  *wait  *vs ssgd' "$TMP/table"
check ranked.three_policies test "$(grep -cE '^ +[0-9]+  (asp|lbb|ssgd) ' "$TMP/table")" -eq 3
check ranked.baseline grep -qE '^ +[0-9]+  ssgd .* 1\.00x$' "$TMP/table"
check ranked.rests_on bash -c "grep -q '^  gtx750 (1 worker): roofline 1.1 TFLOPS' '$TMP/table' && grep -q '^  convergence: analytic, with the parameters fitted for mlp' '$TMP/table'"
# ssgd x2, asp x1, lbb x2 parameter sets, two seeds each.
check ranked.points grep -q 'runs: 10 of 10 points complete in .* (10 run now)' "$TMP/table"
check ranked.stored test "$(rows "$DB" "SELECT count(*) FROM run WHERE status = 'complete' AND json_extract(options, '\$.sweep') = 'advise'")" -eq 10

run json 0 "${A[@]}" --json
cp "$TMP/out" "$TMP/j.json"
# Every field, and the ranking's numbers against the runs themselves.
cat > "$TMP/check.py" <<'PY'
import json, sqlite3, sys, statistics
j = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
def fail(m):
    print(m); sys.exit(1)
for k in ["cluster", "workers", "model", "global_batch", "target_loss", "target_accuracy", "convergence",
          "seeds", "max_epochs", "db", "points", "complete", "ran", "report", "rests_on", "ranking",
          "not_applicable", "candidates"]:
    if k not in j: fail("missing " + k)
if (j["points"], j["complete"], j["ran"]) != (10, 10, 0): fail("counts %r" % ((j["points"], j["complete"], j["ran"]),))
if j["target_loss"] != 0.45 or j["target_accuracy"] is not None: fail("targets")
if [d["compute"] for d in j["rests_on"]["devices"]] != ["roofline"] * 3: fail("devices")
if j["rests_on"]["convergence"] != "analytic-fitted": fail("convergence basis")
r = j["ranking"]
if sorted(x["policy"] for x in r) != ["asp", "lbb", "ssgd"]: fail("policies")
if [x["rank"] for x in r] != [1, 2, 3]: fail("ranks")
means = [x["time_to_target_s"]["mean"] for x in r]
if means != sorted(means): fail("not ranked by mean time")
base = [x for x in r if x["policy"] == "ssgd"][0]["time_to_target_s"]["mean"]
for x in r:
    for k in ["policy", "params", "spec", "status", "seeds", "complete", "reached", "final_loss",
              "final_accuracy", "samples_per_s", "wait_fraction", "speedup_vs_ssgd", "run_ids"]:
        if k not in x: fail("ranking lacks " + k)
    if x["status"] != "reached" or x["reached"] != 2 or len(x["run_ids"]) != 2: fail("status " + x["spec"])
    t = [db.execute("SELECT time_to_target_s FROM summary WHERE run_id = ?", (i,)).fetchone()[0] for i in x["run_ids"]]
    tt = x["time_to_target_s"]
    if abs(tt["mean"] - statistics.mean(t)) > 1e-12 or abs(tt["sd"] - statistics.stdev(t)) > 1e-12: fail("mean/sd " + x["spec"])
    if tt["min"] != min(t) or tt["max"] != max(t): fail("min/max " + x["spec"])
    if abs(x["speedup_vs_ssgd"] - base / tt["mean"]) > 1e-12: fail("speed-up " + x["spec"])
    seeds = sorted(db.execute("SELECT seed FROM run WHERE id IN (%s)" % ",".join(map(str, x["run_ids"]))).fetchall())
    if seeds != [(1,), (2,)]: fail("seeds " + x["spec"])
# each policy's best set is the candidate of that policy with the lowest mean
for x in r:
    c = [y["time_to_target_s"]["mean"] for y in j["candidates"] if y["policy"] == x["policy"] and y["time_to_target_s"]]
    if x["time_to_target_s"]["mean"] != min(c): fail("best of " + x["policy"])
if len(j["candidates"]) != 5: fail("candidates %d" % len(j["candidates"]))
PY
check json.fields "$PY" "$TMP/check.py" "$TMP/j.json" "$DB"

# --- resuming ------------------------------------------------------------------------------
check resume.nothing_run has err "10 already done, 0 to run"
check resume.no_new_runs test "$(rows "$DB" "SELECT count(*) FROM run")" -eq 10
# One run marked interrupted: that point alone runs again.
"$PY" -c "import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.execute(\"UPDATE run SET status='interrupted' WHERE id=(SELECT min(id) FROM run WHERE policy='lbb')\"); d.commit()" "$DB"
run resume 0 "${A[@]}" && check resume.one has err "9 already done, 1 to run"
check resume.one_new test "$(rows "$DB" "SELECT count(*) FROM run")" -eq 11
check resume.said has out "(1 run now)"
# The same answer as before the interruption.
check resume.same_table bash -c "diff <(grep -E '^ +[0-9]+  ' '$TMP/table') <(grep -E '^ +[0-9]+  ' '$TMP/out')"

# --- the report page --------------------------------------------------------------------------
check report.written test -s "$TMP/r.html"
check report.ttt_first bash -c "grep -o 'data-plot=\"[a-z-]*\"' '$TMP/r.html' | head -1 | grep -q time-to-target"
# Three bars (one per policy, its two seeds together), each with the seeds' spread.
check report.spread test "$(grep -c 'data-range="spread"' "$TMP/r.html")" -eq 3
check report.grouped grep -q '(2 runs)' "$TMP/r.html"
check report.target_line grep -q 'data-ref="target"' "$TMP/r.html"
# Six runs met the target: a ring on the loss plot and one on the accuracy plot for each.
check report.crossings test "$(grep -c 'data-mark="crossing"' "$TMP/r.html")" -eq 12
check scratch_removed test -z "$(ls "$TMP/scratch")"
check report.no_float_noise bash -c "! grep -q '0.33333333333333331' '$TMP/r.html'"

cli_finish
