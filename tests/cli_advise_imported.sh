#!/usr/bin/env bash
# `hetsim advise` for a model outside the zoo: a profile imported into the calibration database
# (`hetsim calib import`) or named by the cluster file (`compute: {profile: FILE}`), with a
# convergence fit to its own curves (`hetsim fit-convergence --curves`). The answer uses what
# `hetsim sim` uses for the same point (its time to target is sim's, bit for bit), says it rests
# on the fitted curves, and the refusals (no fit, the proxy, an unknown model) exit 2 before
# anything is stored. Also: a simulation of an imported model that ends by --epochs before its
# target (it crashed before 2026-11-29, found by this advise).
# Usage: bash tests/cli_advise_imported.sh /path/to/hetsim /path/to/source-dir
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=advise_imported.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
mkdir -p "$TMP/scratch"
export TMPDIR="$TMP/scratch"
cd "$TMP" || exit 1
PROFILE="$SRC/tests/data/profile-tinynet.json"

# Two devices measured as the profile's "Test GPU T1", one slowed 2x.
cat > c.yaml <<'YAML'
name: two-t1
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  t1: {memory: 16GiB, compute: {calib: "Test GPU T1"}}
nodes:
  - name: n0
    devices: [{type: t1}, {type: t1, slowdown: 2}]
YAML
# The same with the profile named in the file.
cp "$PROFILE" p.json
sed 's/compute: {calib: "Test GPU T1"}/compute: {profile: p.json}/' c.yaml > cp.yaml
# Curves of 10,000-sample epochs at 64 samples an update: beta0 4, beta1 0.4, beta2 0.35.
awk 'BEGIN { print "samples,loss,batch"; for (i = 0; i <= 12; i++) { S = i * 2000; k = S / 10000
  printf "%d,%.15g,64\n", S, 1 / (4 * k + 0.4) + 0.35 } }' > curves.csv

CAL="$TMP/cal.db"
expect_exit import 0 "$HETSIM" calib import "$PROFILE" --db "$CAL"
cp "$CAL" nofit.db
expect_exit fit 0 "$HETSIM" fit-convergence --curves curves.csv --model tinynet --dataset-size 10000 \
  --convergence analytic:phi=1e12 --db "$CAL"

A=(advise --cluster c.yaml --model tinynet --global-batch 64 --target-loss 0.5 --policies lbb --seeds 1 --jobs 1)

# --- refused before anything runs ----------------------------------------------------------
run no_fit 2 "${A[@]}" --calib nofit.db --db r0.db &&
  check no_fit.says has err "tinynet is an imported model with no convergence fit of its own in nofit.db"
check no_fit.nothing_stored test ! -e r0.db
run proxy 2 "${A[@]}" --calib "$CAL" --convergence proxy --db r0.db &&
  check proxy.says has err "tinynet is an imported model"
run unknown 2 advise --cluster c.yaml --model nosuch --global-batch 64 --target-loss 0.5 --calib "$CAL" --db r0.db &&
  check unknown.lists_imported has err "and the models imported into $CAL: tinynet"
printf 'not a database\n' > junk.db
run junk_calib 1 "${A[@]}" --calib junk.db --db r0.db &&
  check junk_calib.says has err "--calib junk.db: junk.db is not an SQLite database"
run sim_junk_calib 1 sim --cluster c.yaml --model mlp --policy ssgd --global-batch 64 --iterations 3 \
  --convergence analytic --calib junk.db --db r0.db &&
  check sim_junk_calib.says has err "--calib junk.db: junk.db is not an SQLite database"
run missing_calib 2 advise --cluster "$SRC/traces/lbb-4gpu.yaml" --model mlp --global-batch 256 --target-loss 0.45 \
  --calib none.db --db r0.db && check missing_calib.says has err "--calib none.db: No such file or directory"
check refusals.nothing_stored test ! -e r0.db
# A --db (or --calib) that is an SQLite file without tables yet holds no fit and is no error:
# a sweep's shard whose creation a killed run left like this made every later point fail.
: > empty0.db
sqlite3 empty1.db 'PRAGMA journal_mode = WAL;' >/dev/null
for e in empty0 empty1; do
  run "sim_$e" 0 sim --cluster "$SRC/traces/lbb-4gpu.yaml" --model mlp --policy ssgd --global-batch 64 --iterations 3 \
    --convergence analytic --db "$e.db" &&
    check "sim_$e.stored" test "$(rows "$e.db" "SELECT count(*) FROM run")" = 1
done
# Such a --calib, given with a model outside the zoo: an unknown model (exit 2, saying the
# database is empty), not an unreadable database.
: > empty2.db
run sim_empty_calib 2 sim --cluster "$SRC/traces/lbb-4gpu.yaml" --model tinynet --policy ssgd --global-batch 64 \
  --iterations 3 --calib empty2.db --db r0.db &&
  check sim_empty_calib.says has err 'imported into empty2.db: none (the database is empty)'
check sim_empty_calib.nothing_stored test ! -e r0.db
check refusals.no_scratch_left test -z "$(ls scratch)"

# --- the answer ----------------------------------------------------------------------------
run answer 0 "${A[@]}" --calib "$CAL" --db r.db --json
check answer.fields "$PY" - "$TMP/out" <<'PYEOF'
import json, sys
a = json.load(open(sys.argv[1]))
assert a["model"] == "tinynet", a["model"]
r = a["rests_on"]
assert r["convergence"] == "analytic-curves", r
assert "convergence_fit 1: curves.csv" in r["convergence_detail"], r
assert "lambda_tau" not in r["convergence_detail"], r  # lbb and ssgd take no local steps
assert [d["compute"] for d in r["devices"]] == ["calib"], r
by = {x["policy"]: x for x in a["ranking"]}
assert set(by) == {"ssgd", "lbb"}, by.keys()
for x in by.values():
    assert x["status"] == "reached" and x["time_to_target_s"]["mean"] > 0, x
# lbb gives the fast worker more of the batch: it reaches the loss sooner.
assert by["lbb"]["time_to_target_s"]["mean"] < by["ssgd"]["time_to_target_s"]["mean"], by
assert a["ranking"][0]["policy"] == "lbb", a["ranking"][0]
PYEOF
ssgd_t=$("$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); print(repr([x for x in a["ranking"] if x["policy"]=="ssgd"][0]["time_to_target_s"]["mean"]))' out)
# The same point as `hetsim sim` runs it: the same time to target, bit for bit.
run sim_same 0 sim --cluster c.yaml --model tinynet --policy ssgd:overlap=0 --global-batch 64 --convergence analytic \
  --target-loss 0.5 --epochs 30 --seed 1 --calib "$CAL" --db s.db --json
check sim_same.time "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert repr(d["time_to_target_s"]) == sys.argv[2], (d["time_to_target_s"], sys.argv[2]); assert d["convergence_source"].startswith("convergence_fit 1: curves.csv"), d' out "$ssgd_t"
# Its runs are not fitted again (their epochs are the curves'): the curves are.
run refit_runs 2 fit-convergence 1 --db s.db &&
  check refit_runs.says has err "tinynet is not a model of the zoo (an imported one)"
run text 0 "${A[@]}" --calib "$CAL" --db r.db
check text.rests_on has out "convergence: analytic, with the parameters fitted to tinynet's own curves (convergence_fit 1: curves.csv"
check text.ran_nothing_again has out "(0 run now)"

# The cluster's own profile, the fit in --db (no --calib): the same answer.
cp "$CAL" own.db
run profile 0 advise --cluster cp.yaml --model tinynet --global-batch 64 --target-loss 0.5 --policies lbb --seeds 1 \
  --jobs 1 --db own.db --json
check profile.same "$PY" - "$TMP/out" "$ssgd_t" <<'PYEOF'
import json, sys
a = json.load(open(sys.argv[1]))
assert a["rests_on"]["convergence"] == "analytic-curves", a["rests_on"]
assert [d["compute"] for d in a["rests_on"]["devices"]] == ["profile"], a["rests_on"]
s = [x for x in a["ranking"] if x["policy"] == "ssgd"][0]
assert repr(s["time_to_target_s"]["mean"]) == sys.argv[2], (s, sys.argv[2])
PYEOF

# A fit that has lambda_tau (the same curve, and local SGD's at period 4 with Ptau = 1/1.3):
# advise no longer says it is not fitted.
awk 'BEGIN { print "samples,loss,batch,workers,policy,period"; for (p = 1; p <= 4; p += 3) for (i = 0; i <= 12; i++) {
  S = i * 2000; k = S / 10000 / (1 + 0.1 * (p - 1))
  printf "%d,%.15g,32,2,%s,%s\n", S, 1 / (4 * k + 0.4) + 0.35, p == 1 ? "ddp" : "localsgd", p == 1 ? "" : p } }' > local.csv
cp nofit.db local.db
expect_exit fit_local 0 "$HETSIM" fit-convergence --curves local.csv --model tinynet --dataset-size 10000 \
  --convergence analytic:phi=1e12 --db local.db
# localsgd advised with a fit that has no lambda_tau: advise says so.
run local_nofit 0 advise --cluster c.yaml --model tinynet --global-batch 64 --target-loss 0.5 --policies localsgd \
  --seeds 1 --jobs 1 --calib "$CAL" --db r2.db --json
check local_nofit.lambda_tau "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["rests_on"]; assert "lambda_tau 0.05, the loss of local steps (localsgd, lbcal, ashl, adsp), is not fitted" in r["convergence_detail"], r' out
run local_fit 0 advise --cluster c.yaml --model tinynet --global-batch 64 --target-loss 0.5 --policies localsgd \
  --seeds 1 --jobs 1 --db local.db --json
check local_fit.lambda_tau "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["rests_on"]; assert r["convergence"] == "analytic-curves" and "lambda_tau" not in r["convergence_detail"], r' out

# --- an imported model's run that ends by --epochs before its target -----------------------
run epochs_end 0 sim --cluster c.yaml --model tinynet --policy ssgd --global-batch 64 --convergence analytic \
  --target-loss 0.4 --epochs 1 --calib "$CAL" --db e.db --json
check epochs_end.reason "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["stop_reason"] == "epochs" and d["samples"] >= 10000 and d["time_to_target_s"] is None, d' out

cli_finish
