#!/usr/bin/env bash
# CLI tests for `hetsim sim`, `policies`, `models`, the top-level help and the subcommands that
# are not built yet. Usage: cli_sim.sh HETSIM SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP # the short names this script uses
runs() { val "$T/h.db" "SELECT count(*) AS n FROM run"; }

C="$SRC/traces/lbb-4gpu.yaml"

# --- help and the command table ---------------------------------------------------------
expect_exit help 0 "$H" --help
check help_lists_commands grep -q "sim " "$T/out"
for c in sim query policies models calib devices real validate sweep; do
  expect_exit "help_$c" 0 "$H" "$c" --help
done
expect_exit unknown_command 2 "$H" frobnicate
expect_exit no_command 2 "$H"

# --- policies and models ----------------------------------------------------------------
expect_exit policies 0 "$H" policies
for p in ssgd ps-bsp asp ssp localsgd; do check "policies_lists_$p" grep -q "^$p " "$T/out"; done
expect_exit policies_json 0 "$H" policies --json
check policies_json_has_param grep -q '"name": "tau"' "$T/out"
expect_exit models 0 "$H" models
check models_resnet18_params grep -Eq "^resnet18 .* 11173962 " "$T/out"
expect_exit models_json 0 "$H" models --json
check models_json_vgg16 grep -q '"params": 14728266' "$T/out"

# --- a run, its JSON summary, trace and rows ---------------------------------------------
expect_exit sim_json 0 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 256 \
  --iterations 20 --db "$T/h.db" --json --trace-out "$T/trace.json"
for k in run_id policy workers iterations sim_time_s mean_iteration_s samples_per_s wait_fraction events wall_s; do
  check "sim_json_has_$k" grep -q "\"$k\":" "$T/out"
done
check sim_json_iterations grep -q '"iterations": 20,' "$T/out"
check sim_json_status grep -q '"status": "complete"' "$T/out"
if command -v python3 >/dev/null; then
  check sim_json_parses python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["workers"]==4' "$T/out"
  check trace_parses python3 -c '
import json,sys
d=json.load(open(sys.argv[1]))
ev=d["traceEvents"]
tids={e["tid"] for e in ev if e.get("ph")=="X"}
names={e["name"] for e in ev if e.get("ph")=="X"}
assert tids=={0,1,2,3}, tids
assert {"compute","wait","allreduce"} <= names, names
' "$T/trace.json"
  # The trace against the run's stored steps: each step's compute slice on its worker's track,
  # its times as the writer promises ("%.3f" of the microseconds), each track's slices in
  # order without overlap, and each step's communication ending when the step row says.
  check trace_matches_steps python3 -c '
import json,sqlite3,sys
ev=json.load(open(sys.argv[1]))["traceEvents"]
db=sqlite3.connect(sys.argv[2])
us3=lambda s: float("%.3f" % (s*1e6))
sl=[e for e in ev if e["ph"]=="X"]
comp={(e["tid"],e["ts"]):e for e in sl if e["name"]=="compute"}
rows=db.execute("SELECT worker,start_s,compute_end_s,comm_end_s FROM step WHERE run_id=1").fetchall()
assert len(rows)==80 and len(comp)==80, (len(rows), len(comp))
ends={}
for w,s,c,m in rows:
    e=comp[(w,us3(s))]
    assert e["dur"]==us3(c-s) and e["cat"]=="compute" and e["pid"]==1, (e, s, c)
    ends.setdefault(w,set()).add(us3(m))
for tid in range(4):
    mine=sorted((e["ts"],e["dur"],e["name"]) for e in sl if e["tid"]==tid)
    for a,b in zip(mine,mine[1:]):
        assert b[0] >= a[0]+a[1]-0.002, (a,b)
    comm_ends={round(t+d,3) for t,d,n in mine if n=="allreduce"}
    assert all(any(abs(x-y)<=0.002 for y in comm_ends) for x in ends[tid]), tid
' "$T/trace.json" "$T/h.db"
fi
# A trace to something that is not a regular file (a pipe here; /dev/null alike) is written in
# place: nothing may be renamed over it (as root that replaced /dev/null with a file).
mkfifo "$T/trace.fifo"
timeout 60 cat "$T/trace.fifo" >"$T/trace_fifo.json" &
fifo_reader=$!
expect_exit trace_to_fifo 0 timeout 60 "$H" sim --cluster "$C" --model resnet18 --policy ssgd \
  --global-batch 256 --iterations 3 --db "$T/fifo.db" --store summary --trace-out "$T/trace.fifo"
wait $fifo_reader
check trace_fifo_still_fifo test -p "$T/trace.fifo"
check trace_fifo_no_tmp_left test -z "$(ls "$T" | grep 'trace.fifo.tmp')"
if command -v python3 >/dev/null; then
  check trace_fifo_parses python3 -c '
import json,sys
ev=json.load(open(sys.argv[1]))["traceEvents"]
assert sum(e["ph"]=="X" and e["name"]=="compute" for e in ev)==12
' "$T/trace_fifo.json"
fi
check steps_stored test "$(val "$T/h.db" "SELECT count(*) FROM step WHERE run_id=1")" = 80
check workers_stored test "$(val "$T/h.db" "SELECT count(*) FROM worker WHERE run_id=1")" = 4
check run_complete test "$(val "$T/h.db" "SELECT status FROM run WHERE id=1")" = complete

expect_exit sim_text 0 "$H" sim --cluster "$C" --model resnet18 --policy "ssp:s=1" --global-batch 256 \
  --sim-time 10s --db "$T/h.db" --store summary
check sim_text_summary grep -q "simulated time" "$T/out"
check summary_store_no_steps test "$(val "$T/h.db" "SELECT count(*) FROM step WHERE run_id=2")" = 0
expect_exit sim_events_csv 0 "$H" sim --cluster "$C" --events "$SRC/traces/lbb-4gpu-events.csv" \
  --model resnet18 --policy asp --global-batch 256 --sim-time 60s --db "$T/h.db"

# Same seed, same rows; another seed (with jitter), other rows.
J="$T/jitter.yaml"
sed 's/^jitter: {cv: 0.0}/jitter: {cv: 0.2}/' "$C" >"$J"
for s in 5 5 6; do
  "$H" sim --cluster "$J" --model resnet18 --policy ssgd --global-batch 256 --iterations 30 \
    --seed $s --db "$T/det.db" --json >"$T/det-$s.json" 2>&1
done
steps_of() { "$H" query --db "$T/det.db" sql "SELECT worker,step,batch,start_s,compute_end_s,comm_end_s,wait_s FROM step WHERE run_id=$1 ORDER BY worker,step" --csv; }
check same_seed_same_rows test "$(steps_of 1)" = "$(steps_of 2)"
check other_seed_other_rows test "$(steps_of 1)" != "$(steps_of 3)"

# --- bad input: exit 2, a precise message, nothing stored ----------------------------------
before=$(runs)
cat >"$T/bad.yaml" <<'YAML'
name: bad
device_types:
  g: {compute: {t0: 4ms, per_sample: 0.5ms}}
nodes:
  - name: n0
    link: {bandwidth: fast}
    devices: [{type: g, count: 2}]
YAML
expect_exit bad_cluster 2 "$H" sim --cluster "$T/bad.yaml" --model resnet18 --policy ssgd --global-batch 8 --iterations 1 --db "$T/h.db"
check bad_cluster_message grep -q 'bad.yaml:6:23: nodes\[0\].link.bandwidth: expected a bandwidth' "$T/err"
expect_exit missing_cluster 2 "$H" sim --cluster "$T/nope.yaml" --model resnet18 --policy ssgd --global-batch 8 --iterations 1 --db "$T/h.db"
expect_exit unknown_model 2 "$H" sim --cluster "$C" --model resnet19 --policy ssgd --global-batch 8 --iterations 1 --db "$T/h.db"
check unknown_model_lists grep -q "valid: mlp" "$T/err"
expect_exit unknown_policy 2 "$H" sim --cluster "$C" --model resnet18 --policy sgd --global-batch 8 --iterations 1 --db "$T/h.db"
check unknown_policy_lists grep -q "valid: ssgd" "$T/err"
expect_exit unknown_param 2 "$H" sim --cluster "$C" --model resnet18 --policy ssp:x=1 --global-batch 8 --iterations 1 --db "$T/h.db"
expect_exit bad_param 2 "$H" sim --cluster "$C" --model resnet18 --policy ssp:s=-1 --global-batch 8 --iterations 1 --db "$T/h.db"
expect_exit no_stop 2 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 8 --db "$T/h.db"
expect_exit bad_batch 2 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 0 --iterations 1 --db "$T/h.db"
expect_exit bad_simtime 2 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 8 --sim-time soon --db "$T/h.db"
expect_exit too_few_samples 2 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 2 --iterations 1 --db "$T/h.db"
expect_exit memory_limit 2 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 100000 --iterations 1 --db "$T/h.db"
check memory_limit_message grep -q "memory limit" "$T/err"
expect_exit target_needs_convergence 2 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 8 --target-loss 0.5 --db "$T/h.db"
expect_exit unknown_option 2 "$H" sim --cluster "$C" --frob
printf 'at,event,worker,value,type,node\n1s,slowdown,9,2,,\n' >"$T/bad.csv"
expect_exit bad_events_csv 2 "$H" sim --cluster "$C" --events "$T/bad.csv" --model resnet18 --policy ssgd --global-batch 8 --iterations 1 --db "$T/h.db"
check bad_events_csv_message grep -q "bad.csv:2" "$T/err"
check nothing_stored_for_bad_input test "$(runs)" = "$before"

# --- progress only on a terminal (or when forced), interruption -------------------------
bash "$SRC/bench/gen_cluster.sh" 20000 >"$T/big.yaml"
# The display starts after 1 s, which a fixed-length run can beat on a fast machine: run one
# that would last for hours and interrupt it once a line is drawn (or after a watchdog).
HETSIM_PROGRESS=1 "$H" sim --cluster "$T/big.yaml" --model resnet18 --policy ssgd --global-batch 640000 \
  --iterations 100000000 --db "$T/p.db" --store summary >"$T/out" 2>"$T/err" &
pid=$!
for _ in $(seq 1 $((300 * ${HETSIM_TEST_SLOW:-1}))); do
  grep -q "%" "$T/err" && break
  sleep 0.1
done
kill -INT $pid
wait $pid
check progress_forced grep -q "%" "$T/err"
"$H" sim --cluster "$T/big.yaml" --model resnet18 --policy ssgd --global-batch 640000 \
  --iterations 40 --db "$T/p.db" --store summary >"$T/out" 2>"$T/err"
check progress_silent_when_piped test ! -s "$T/err"

"$H" sim --cluster "$T/big.yaml" --model resnet18 --policy ssgd --global-batch 640000 \
  --iterations 100000000 --db "$T/int.db" >"$T/out" 2>"$T/err" &
pid=$!
# Interrupt once the run has stored its first committed step rows (so the signal handler is
# installed and there is something to keep), not after a fixed sleep that a loaded machine can
# outlast. HETSIM_TEST_SLOW stretches the bound under valgrind (tests/valgrind.sh).
for _ in $(seq 1 $((600 * ${HETSIM_TEST_SLOW:-1}))); do
  [ "$(val "$T/int.db" "SELECT count(*) > 0 FROM step" 2>/dev/null)" = 1 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -INT $pid
# A run that ignores the interrupt must not run on for ever: kill it and let the checks fail.
( sleep $((60 * ${HETSIM_TEST_SLOW:-1})); kill -9 $pid 2>/dev/null ) >/dev/null 2>&1 &
watchdog=$!
wait $pid
rc=$?
pkill -P $watchdog 2>/dev/null; kill $watchdog 2>/dev/null
check interrupted_exit_1 test "$rc" = 1
check interrupted_status test "$(val "$T/int.db" "SELECT status FROM run")" = interrupted
check interrupted_steps_kept test "$(val "$T/int.db" "SELECT count(*) > 0 FROM step")" = 1
check interrupted_integrity test "$(val "$T/int.db" "PRAGMA integrity_check")" = ok

cli_finish
