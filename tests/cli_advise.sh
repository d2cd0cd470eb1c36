#!/usr/bin/env bash
# CLI tests for `hetsim advise`: the refusals before anything runs (exit 2, nothing stored), the
# ranked table and its numbers against the runs in the database, the JSON object's fields,
# resuming (a complete advise runs nothing again; one interrupted run is all that reruns), the
# report page (time-to-target bars with the seeds' spread, the target on the loss plot), and,
# when Open MPI's mpirun is installed, the same answer from 2 and 3 ranks and an MPI advise
# killed and resumed.
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

# --- lambda_tau's range ---------------------------------------------------------------------
# asp and lbb take no local steps: nothing rests on lambda_tau.
check lt.null_without_local "$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["lambda_tau_range"] is None' "$TMP/j.json"
# localsgd, lambda_tau unfitted: its grid again at 0 and 0.45, each end ranked with ssgd's best.
LT=(advise --cluster "$TMP/c.yaml" --model mlp --global-batch 256 --target-loss 0.45 --policies localsgd --seeds 2
    --jobs 2 --db "$TMP/lt.db")
run lt.json 0 "${LT[@]}" --json
cp "$TMP/out" "$TMP/lt.json"
cat > "$TMP/lt.py" <<'PY'
import json, sqlite3, statistics, sys
j = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
r = j["lambda_tau_range"]
assert r["values"] == [0, 0.45] and r["run"] and not r["given"] and r["why_not"] is None, r
# localsgd's 3 sets x 2 seeds at each end
assert (r["points"], r["complete"], r["ran"]) == (12, 12, 12), r
assert [p["policy"] for p in r["policies"]] == ["localsgd"], r
ssgd = [x for x in j["ranking"] if x["policy"] == "ssgd"][0]["time_to_target_s"]["mean"]
local = [x for x in j["ranking"] if x["policy"] == "localsgd"][0]
t = []
for e, lt in enumerate(r["values"]):
    at = r["policies"][0]["at"][e]
    # each end's runs are localsgd's with that lambda_tau, and its time their mean
    runs = db.execute("SELECT s.time_to_target_s, json_extract(r.options, '$.convergence_params') FROM run r "
                      "JOIN summary s ON s.run_id = r.id WHERE r.id IN (%s)" % ",".join(map(str, at["run_ids"]))).fetchall()
    assert len(runs) == 2 and all(float(c.split(",lambda_tau=")[1].split(",")[0]) == lt for _, c in runs), runs
    assert abs(at["time_to_target_s"]["mean"] - statistics.mean(x for x, _ in runs)) < 1e-12, at
    # the best of the end's candidates
    assert at["spec"].startswith("localsgd:tau="), at
    t.append(at["time_to_target_s"]["mean"])
    assert at["rank"] == (1 if t[-1] < ssgd else 2), (at, ssgd)
    assert r["first"][e] == (at["spec"] if t[-1] < ssgd else [x for x in j["ranking"] if x["policy"] == "ssgd"][0]["spec"]), r
# no loss of local steps is never slower than the default 0.05, which is never slower than 0.45
assert t[0] <= local["time_to_target_s"]["mean"] <= t[1] and t[0] < t[1], (t, local)
PY
check lt.fields "$PY" "$TMP/lt.py" "$TMP/lt.json" "$TMP/lt.db"
run lt.text 0 "${LT[@]}"
check lt.text.header has out "lambda_tau from 0 to 0.45 (the range measured against PyTorch's local SGD)"
check lt.text.row grep -qE '^    localsgd  [0-9.]+ s \(tau=[0-9]+\), rank [12]  to  [0-9.]+ s \(tau=[0-9]+\), rank [12]$' "$TMP/out"
check lt.text.resumed has out "runs: 10 of 10 points complete in $TMP/lt.db (0 run now); lambda_tau's range 12 of 12 (0 run now)"
run lt.given 0 "${LT[@]}" --json --lambda-tau-range 0.01,0.3
check lt.given.values "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["lambda_tau_range"]; assert r["values"] == [0.01, 0.3] and r["given"] and r["ran"] == 12, r' "$TMP/out"
run lt.none 0 "${LT[@]}" --lambda-tau-range none
check lt.none.said has out "lambda_tau: the local-step policies were not run again over its range (--lambda-tau-range none)"
check lt.none.no_runs grep -qxF "runs: 10 of 10 points complete in $TMP/lt.db (0 run now)" "$TMP/out"
run lt.set 0 "${LT[@]}" --json --convergence analytic:lambda_tau=0.1
check lt.set.null "$PY" -c 'import json,sys; assert json.load(open(sys.argv[1]))["lambda_tau_range"] is None' "$TMP/out"
for bad in 0.2,0.1 0.1 -1,1 0,nope 1,1; do
  run "lt.bad_$bad" 2 "${LT[@]}" --lambda-tau-range "$bad" && check "lt.bad_$bad.msg" has err "--lambda-tau-range: expected LO,HI"
done
# Under a launcher's environment (ranks meeting in files, as in "under mpirun" below): the range's
# grid is shared by the ranks too, and the answer is the one above.
( PMIX_NAMESPACE=job-lt OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 "$HETSIM" "${LT[@]}" --db "$TMP/ltf.db" --json \
  >"$TMP/ltf1.out" 2>"$TMP/ltf1.err" ) &
PMIX_NAMESPACE=job-lt OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 run lt.files 0 "${LT[@]}" --db "$TMP/ltf.db" --json
wait $!
check lt.files.rank1 test $? -eq 0 -a ! -s "$TMP/ltf1.out"
cat > "$TMP/lt_same.py" <<'PY'
import json, sys
def norm(p):
    j = json.load(open(p))
    for k in ["db", "ran", "report"]: j.pop(k)
    for x in j["ranking"] + j["candidates"]: x.pop("run_ids")
    j["lambda_tau_range"].pop("ran")
    for x in j["lambda_tau_range"]["policies"]:
        for y in x["at"]: y.pop("run_ids")
    return j
assert norm(sys.argv[1]) == norm(sys.argv[2])
PY
check lt.files.same "$PY" "$TMP/lt_same.py" "$TMP/lt.json" "$TMP/out"
check lt.scratch_removed test -z "$(ls "$TMP/scratch")"

# --- under mpirun ------------------------------------------------------------------------------
# The same advise by MPI ranks: `hetsim` (ranks from the launcher's environment, meeting in files
# next to --db) and `hetsim-mpi` (MPI_COMM_WORLD) when it was built, with 2 and 3 ranks, gives
# the answer of the local processes above (the runs are deterministic per seed): every field but
# the run ids, the database and how many ran now. Then a rank that starts late (rank 0 must not
# answer before it has merged), and an MPI advise killed half-way and run again: only the
# missing points run, and the answer is the uninterrupted one.
cat > "$TMP/same.py" <<'PY'
import json, sys
def norm(p):
    j = json.load(open(p))
    for k in ["db", "ran", "report"]: j.pop(k, None)
    for x in j["ranking"] + j["candidates"]: x.pop("run_ids", None)
    return j
a, b = norm(sys.argv[1]), norm(sys.argv[2])
for k in a:
    if a[k] != b.get(k): print("differs in %s: %s | %s" % (k, json.dumps(a[k])[:400], json.dumps(b.get(k))[:400])); sys.exit(1)
if set(a) != set(b): print("fields differ"); sys.exit(1)
PY
# field FILE KEY: a top-level field of a JSON answer.
field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
# stored DB: the points with a complete run in DB or its ranks' shards.
cat > "$TMP/stored.py" <<'PY'
import glob, sqlite3, sys, time
db, want = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0
files = lambda: [db] + glob.glob(db + ".rank[0-9]") + glob.glob(db + ".rank[0-9].w[0-9]")
def count():
    keys = set()
    for f in files():
        try:
            c = sqlite3.connect("file:%s?mode=ro" % f, uri=True, timeout=0.2)
            keys |= {r[0] for r in c.execute("SELECT json_extract(options, '$.sweep_point') FROM run WHERE status = 'complete'")}
            c.close()
        except sqlite3.Error:
            pass  # a shard being created or removed
    keys.discard(None)
    return len(keys)
# with a count: wait (at most 60 s times the third argument) until that many points are
# stored, then say how many; with a session id too, kill -9 every process of that session the
# moment they are (a shell loop after this script ended was too late on an idle machine, where
# the 21 points take a fraction of a second: the job had finished when the kill came)
def kill_session(sid):
    import os, signal
    for _ in range(200):
        pids = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    stat = open("/proc/%s/stat" % d).read()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[3]) == sid: pids.append(int(d))
        if not pids: return
        for p in pids:
            try: os.kill(p, signal.SIGKILL)
            except OSError: pass
        time.sleep(0.01)
for _ in range(6000 * (int(sys.argv[3]) if len(sys.argv) > 3 else 1) if want else 1):
    n = count()
    if n >= want: break
    time.sleep(0.002)
if len(sys.argv) > 4: kill_session(int(sys.argv[4]))
print(n)
PY
# The ranks' meeting in files (`hetsim`, no MPI) with a launcher's environment set by hand, so
# that it is checked where mpirun is not: rank 1 starts late and rank 0 waits for it; without a
# job id rank 0 cannot wait and says so; when its launcher (here, the parent) is gone it stops.
# HETSIM_TEST_SLOW stretches the waits and time limits under valgrind (tests/valgrind.sh).
SLOW=${HETSIM_TEST_SLOW:-1}
F="$TMP/files.db"
( sleep 1; PMIX_NAMESPACE=job-a OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 \
  "$HETSIM" "${A[@]}" --db "$F" --json >"$TMP/f1.out" 2>"$TMP/f1.err" ) &
late=$!
PMIX_NAMESPACE=job-a OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 run files.rank0 0 "${A[@]}" --db "$F" --json &&
  check files.same_answer "$PY" "$TMP/same.py" "$TMP/j.json" "$TMP/out"
wait $late
check files.rank1 test $? -eq 0 -a ! -s "$TMP/f1.out"
check files.removed test -z "$(ls "$TMP" | grep -F 'files.db.rank')"
env -u PMIX_NAMESPACE -u OMPI_MCA_ess_base_jobid -u SLURM_JOB_ID OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 \
  "$HETSIM" "${A[@]}" --db "$TMP/nojob.db" >"$TMP/out" 2>"$TMP/err"
check files.no_job_id test $? -eq 1
check files.no_job_id.said grep -q 'gives no job id .* run hetsim-mpi instead; the answer may lack' "$TMP/err"
check files.no_job_id.partial has out "runs: 5 of 10 points complete"
PMIX_NAMESPACE=job-b OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 \
  bash -c '"$0" "$@" >"'"$TMP"'/out" 2>"'"$TMP"'/err" & echo $! >"'"$TMP"'/pid"; sleep '"$(awk -v f="$SLOW" 'BEGIN { print 0.5 * f }')" "$HETSIM" "${A[@]}" --db "$TMP/gone.db"
gone=$(cat "$TMP/pid")
for _ in $(seq $((100 * SLOW))); do kill -0 "$gone" 2>/dev/null || break; sleep 0.1; done
check files.launcher_gone bash -c "! kill -0 $gone 2>/dev/null && grep -q 'the MPI launcher ended before rank 1 was done' '$TMP/err'"
kill -9 "$gone" 2>/dev/null

if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # A slower advise for the interruption (resnet18 to 60% accuracy, three seeds, step rows): 21
  # points of about 0.1 s; its answer from local processes first.
  R=(advise --cluster "$TMP/c.yaml" --model resnet18 --global-batch 256 --target-accuracy 0.6
     --convergence analytic:acc_max=0.9,acc_alpha=1 --policies ssp,lbb --seeds 3 --store steps)
  run slow_local 0 "${R[@]}" --jobs 2 --db "$TMP/slow.db" --json && cp "$TMP/out" "$TMP/slow.json"
  for bin in "$HETSIM" "$(dirname "$HETSIM")/hetsim-mpi"; do
    [ -x "$bin" ] || continue
    name=mpi.$(basename "$bin")
    # hetsim-mpi: Open MPI's own allocations outlive MPI_Finalize (see tests/cli_sweep.sh).
    asan=${ASAN_OPTIONS:-}
    [ "$bin" != "$HETSIM" ] && export ASAN_OPTIONS="${asan:+$asan:}detect_leaks=0"
    for np in 2 3; do
      M="$TMP/m$np.$(basename "$bin").db"
      timeout $((60 * SLOW)) mpirun -np $np "$bin" "${A[@]}" --db "$M" --json >"$TMP/out" 2>"$TMP/err"
      rc=$?
      check "$name.np$np.exit" test $rc -eq 0 || head -c 1500 "$TMP/err"
      check "$name.np$np.same_answer" "$PY" "$TMP/same.py" "$TMP/j.json" "$TMP/out"
      check "$name.np$np.all_ran" test "$(field "$TMP/out" ran) $(field "$TMP/out" complete)" = "10 10"
      check "$name.np$np.every_rank" test "$(grep -c "rank $((np - 1)))" "$TMP/err")" -ge 3
      check "$name.np$np.runs" test "$(rows "$M" "SELECT count(*) FROM run")" -eq 10
      check "$name.np$np.nothing_left" test -z "$(ls "$TMP" | grep -F "$(basename "$M")." | grep -v -- '-wal$\|-shm$')"
    done
    # lambda_tau's range is a second sweep: hetsim-mpi keeps MPI initialised for both (a sweep
    # alone finalizes it, and MPI cannot start again), and the answer is the local one.
    timeout $((60 * SLOW)) mpirun -np 2 "$bin" "${LT[@]}" --db "$TMP/mlt.$(basename "$bin").db" --json >"$TMP/out" \
      2>"$TMP/err"
    rc=$?
    check "$name.lambda_tau.exit" test $rc -eq 0 || head -c 1500 "$TMP/err"
    check "$name.lambda_tau.same_answer" "$PY" "$TMP/lt_same.py" "$TMP/lt.json" "$TMP/out"
    # Killed (every process of the job, kill -9: mpirun's ranks live in process groups of their
    # own, and outlive an mpirun killed alone for a while) once a few points are stored in the
    # ranks' shards, then run again.
    # The 21 points take well under a second on an idle machine, so the kill can come after the
    # last: up to 3 tries, each on a fresh database, to catch the job mid-way.
    for try in 1 2 3; do
      I="$TMP/i.$(basename "$bin").$try.db"
      setsid timeout $((60 * SLOW)) mpirun -np 3 "$bin" "${R[@]}" --db "$I" --json >"$TMP/i1.out" 2>"$TMP/i1.err" &
      pid=$!
      "$PY" "$TMP/stored.py" "$I" 2 "$SLOW" "$pid" >/dev/null
      exec 3>&2 2>/dev/null # (the shell's "Killed" notice of the job goes nowhere)
      for _ in $(seq 100); do
        job=$(ps -o pid= -s "$pid")
        [ -n "$job" ] || break
        kill -9 $job 2>/dev/null
        sleep 0.05
      done
      wait "$pid"
      exec 2>&3 3>&-
      before=$("$PY" "$TMP/stored.py" "$I")
      echo "$name: killed with $before of 21 points stored (try $try)"
      [ "$before" -lt 21 ] && break
    done
    check "$name.interrupted" test "$before" -ge 1 -a "$before" -lt 21
    timeout $((60 * SLOW)) mpirun -np 3 "$bin" "${R[@]}" --db "$I" --json >"$TMP/out" 2>"$TMP/err"
    rc=$?
    check "$name.resume.exit" test $rc -eq 0 || head -c 3000 "$TMP/err"
    check "$name.resume.only_missing" test "$(field "$TMP/out" ran)" = $((21 - before))
    check "$name.resume.said" test "$(grep -o '[0-9]* already done' "$TMP/err" | awk '{s += $1} END {print s}')" = "$before"
    check "$name.resume.same_answer" "$PY" "$TMP/same.py" "$TMP/slow.json" "$TMP/out"
    check "$name.resume.one_run_each" test "$(rows "$I" "SELECT count(DISTINCT json_extract(options, '\$.sweep_point')) || ' ' || count(*) FROM run WHERE status = 'complete'")" = "21 21"
    export ASAN_OPTIONS="$asan"
  done
  # `hetsim`'s rank 0 waits for a rank that starts a second late before it answers.
  L="$TMP/late.db"
  timeout $((60 * SLOW)) mpirun -np 1 "$HETSIM" "${A[@]}" --db "$L" --json : \
    -np 1 bash -c 'sleep 1; exec "$0" "$@"' "$HETSIM" "${A[@]}" --db "$L" --json >"$TMP/out" 2>"$TMP/err"
  rc=$?
  check mpi.late_rank.exit test $rc -eq 0 || head -c 1500 "$TMP/err"
  check mpi.late_rank.same_answer "$PY" "$TMP/same.py" "$TMP/j.json" "$TMP/out"
  check mpi.late_rank.no_done_files test -z "$(ls "$TMP" | grep -F 'late.db.rank')"
else
  echo "skip advise.mpi: no mpirun (apt-get install openmpi-bin)"
fi

# A target accuracy with evaluation noise: the answer says it is met at the median first passage.
run acc_noise 0 advise --cluster "$TMP/c.yaml" --model mlp --global-batch 256 --target-accuracy 0.84 \
  --convergence analytic:acc_noise=0.01 --policies ssgd --seeds 1 --jobs 1 --db "$TMP/noise.db" &&
  check acc_noise.says has out "met at the median first passage of evaluations with noise sd 0.01"

cli_finish
