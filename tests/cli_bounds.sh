#!/usr/bin/env bash
# Bounds and refusals at the door (issue 19, docs/reliability.md "Bounds and numbers"): every
# sim run has a bound, a target the convergence model cannot reach is refused before the run,
# `query sql` has time, row and byte limits, numbers that would overflow or turn into inf/NaN
# later are refused at load time with FILE:LINE:COL, no output file replaces the database or an
# existing file of a rejected run, and a run whose summary cannot be stored ends `failed`.
# Usage: bash tests/cli_bounds.sh /path/to/hetsim /path/to/source-dir
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=bounds.
C4="$SRC/traces/lbb-4gpu.yaml"
DB="$TMP/b.db"
sim() { "$HETSIM" sim --cluster "$C4" --model resnet18 --policy ssgd --global-batch 64 "$@"; }
# no_db NAME FILE: a check that nothing was stored in FILE for rejected input: no file, or (a run
# refused once the database was open) no run in it.
no_runs() { [ ! -e "$1" ] || [ "$(sqlite3 "$1" "SELECT count(*) FROM run")" = 0 ]; }
no_db() { check "$1" no_runs "$2"; }
# jget KEY: the value of KEY in the JSON object on $TMP/out (python3 of Debian, no torch needed).
jget() { /usr/bin/python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v))' "$TMP/out" "$1"; }

# --- targets the convergence model cannot reach: refused before the run ---------------------
# resnet18's analytic model has no accuracy map (acc_max 0) and a loss floor beta2 = 0.2.
expect_exit unreachable_accuracy 2 sim --convergence analytic --target-accuracy 0.9 --db "$TMP/u.db"
check unreachable_accuracy_says_why has err "acc_max = 0"
expect_exit unreachable_loss 2 sim --convergence analytic --target-loss 0.2 --db "$TMP/u.db"
check unreachable_loss_says_why has err "beta2 = 0.2"
expect_exit accuracy_above_acc_max 2 sim --convergence analytic:acc_max=0.8,acc_alpha=1 --target-accuracy 0.85 --db "$TMP/u.db"
expect_exit accuracy_at_acc_max 2 sim --convergence analytic:acc_max=0.8,acc_alpha=1 --target-accuracy 80% --db "$TMP/u.db"
no_db unreachable_nothing_stored "$TMP/u.db"
# A constant accuracy map (acc_alpha 0) does reach acc_max: not refused.
expect_exit constant_map_reaches 0 sim --convergence analytic:acc_max=0.8,acc_alpha=0 --target-accuracy 0.8 --db "$DB" --json
check constant_map_stop_reason test "$(jget stop_reason)" = '"target"'

# --- the bound of every run, and why a run stopped ------------------------------------------
"$HETSIM" sim --help >"$TMP/out"
check help_default_bound has out "default 1000000"
check help_default_rows has out "default 50000000"
# A target that is reachable in principle but far away: the bound ends the run as failed.
expect_exit bound_ends_run 1 sim --convergence analytic:beta0=0.0001 --target-loss 0.5 --max-iterations 500 --json --db "$DB"
check bound_stop_reason test "$(jget stop_reason)" = '"max_iterations"'
check bound_target_reached test "$(jget target_reached)" = false
check bound_status test "$(jget status)" = '"failed"'
check bound_iterations test "$(jget iterations)" = 500
check bound_message has err "--max-iterations"
id=$(jget run_id)
check bound_stored test "$(val "$DB" "SELECT status || ':' || (error LIKE '%--max-iterations%') FROM run WHERE id = $id")" = "failed:1"
check bound_summary_stored test "$(val "$DB" "SELECT iterations FROM summary WHERE run_id = $id")" = 500
# The bound applies without the option: a target-only run of a one-worker cluster stops at
# 1,000,000 iterations (--store summary: about a second).
cat >"$TMP/one.yaml" <<'YAML'
name: one
device_types:
  g: {memory: 8GiB, compute: {t0: 1ms, per_sample: 1us}}
nodes:
  - {name: n, devices: [{type: g}]}
YAML
expect_exit default_bound 1 "$HETSIM" sim --cluster "$TMP/one.yaml" --model mlp --policy ssgd --global-batch 8 \
  --convergence analytic:beta0=1e-9 --target-loss 0.5 --store summary --json --db "$DB"
check default_bound_iterations test "$(jget iterations)" = 1000000
check default_bound_reason test "$(jget stop_reason)" = '"max_iterations"'
# --max-iterations 0 lifts the bound; a run with --iterations is bounded by it alone.
expect_exit iterations_over_default 0 "$HETSIM" sim --cluster "$TMP/one.yaml" --model mlp --policy ssgd --global-batch 8 \
  --iterations 1000010 --store summary --json --db "$DB"
check iterations_over_default_reason test "$(jget stop_reason)" = '"iterations"'
# A stop condition the user gave, target not reached: complete, and it says so.
expect_exit not_reached_text 0 sim --iterations 20 --convergence analytic --target-loss 0.5 --db "$DB"
check not_reached_line has out "stopped by       --iterations 20 (target not reached)"
expect_exit not_reached_json 0 sim --iterations 20 --convergence analytic --target-loss 0.5 --db "$DB" --json
check not_reached_reason test "$(jget stop_reason)" = '"iterations"'
check not_reached_flag test "$(jget target_reached)" = false
expect_exit sim_time_reason 0 sim --sim-time 1s --db "$DB" --json
check sim_time_reason_json test "$(jget stop_reason)" = '"sim_time"'
# The size guard on the step store.
expect_exit step_rows_guard 1 sim --iterations 100 --max-step-rows 50 --db "$DB" --json
check step_rows_guard_message has err "--max-step-rows"
check step_rows_guard_failed test "$(val "$DB" "SELECT status FROM run ORDER BY id DESC LIMIT 1")" = failed
check step_rows_guard_rows test "$(val "$DB" "SELECT count(*) <= 50 FROM step WHERE run_id = (SELECT max(id) FROM run)")" = 1
expect_exit bad_max_iterations 2 sim --iterations 5 --max-iterations -1 --db "$DB"

# --- query sql: time, rows, bytes -----------------------------------------------------------
CTE="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
expect_exit sql_rows_default 1 "$HETSIM" query --db "$DB" sql "$CTE SELECT x FROM c"
check sql_rows_message has err "--max-rows"
check sql_rows_nothing_printed test ! -s "$TMP/out"
expect_exit sql_rows_csv 1 "$HETSIM" query --db "$DB" --csv --max-rows 3 sql "$CTE SELECT x FROM c"
check sql_rows_csv_count test "$(tr -d '\r' <"$TMP/out" | tail -n +2 | wc -l)" = 3
expect_exit sql_rows_raised 0 "$HETSIM" query --db "$DB" --csv --max-rows 5 sql "$CTE SELECT x FROM c LIMIT 5"
expect_exit sql_time 1 "$HETSIM" query --db "$DB" --time-limit 1s sql "$CTE SELECT count(*) FROM c"
check sql_time_message has err "--time-limit"
expect_exit sql_blob 1 "$HETSIM" query --db "$DB" sql "SELECT length(randomblob(1000000000))"
check sql_blob_message has err "--max-bytes"
expect_exit sql_bytes 1 "$HETSIM" query --db "$DB" --json --max-bytes 1000 sql "$CTE SELECT printf('%0100d', x) FROM c LIMIT 50"
check sql_bytes_message has err "--max-bytes"
expect_exit sql_bytes_raised 0 "$HETSIM" query --db "$DB" --json --max-bytes 1MiB sql "$CTE SELECT printf('%0100d', x) FROM c LIMIT 50"
expect_exit sql_limit_not_sql 2 "$HETSIM" query --db "$DB" --max-rows 5 runs
expect_exit sql_bad_time 2 "$HETSIM" query --db "$DB" --time-limit soon sql "SELECT 1"
# JSON keeps a text's NUL bytes.
expect_exit json_nul 0 "$HETSIM" query --db "$DB" --json sql "SELECT 'a' || char(0) || 'b' AS t"
check json_nul_kept has out '"a\u0000b"'

# --- numbers --------------------------------------------------------------------------------
expect_exit global_batch_overflow 2 sim --iterations 5 --global-batch 99999999999999 --db "$TMP/n.db"
expect_exit iterations_past_int64 2 sim --iterations 9223372036854775808 --db "$TMP/n.db"
expect_exit seed_past_uint64 2 sim --iterations 5 --seed 18446744073709551616 --db "$TMP/n.db"
expect_exit seed_negative 2 sim --iterations 5 --seed -1 --db "$TMP/n.db"
no_db numbers_nothing_stored "$TMP/n.db"
expect_exit seed_uint64_max 0 sim --iterations 5 --seed 18446744073709551615 --db "$DB" --json
check seed_json test "$(jget seed)" = 18446744073709551615
id=$(jget run_id)
check seed_stored_bits test "$(val "$DB" "SELECT seed FROM run WHERE id = $id")" = -1
expect_exit real_global_batch_overflow 2 "$HETSIM" real --model mlp --policy ssgd --global-batch 99999999999999 --iterations 2 --db "$TMP/n.db"
# --timeout 1e300s became a time_t overflow in the real runtime's deadlines (found by
# -fsanitize=float-cast-overflow): refused at the door.
expect_exit real_timeout_overflow 2 "$HETSIM" real --model mlp --policy ssgd --global-batch 8 --iterations 2 --timeout 1e300s --db "$TMP/n.db"
expect_exit real_time_overflow 2 "$HETSIM" real --model mlp --policy ssgd --global-batch 8 --time 1e300s --db "$TMP/n.db"
expect_exit real_seed_past_uint64 2 "$HETSIM" real --model mlp --policy ssgd --global-batch 8 --iterations 2 --seed 18446744073709551616 --db "$TMP/n.db"

# Cluster files: ranges at load time, with FILE:LINE:COL.
# bad NAME YAML_LINE_REPLACEMENT: the base cluster with one line replaced must be refused.
base_cluster() {
  cat <<'YAML'
name: r
network: {bandwidth: 10Gbps, latency: 20us}
parameter_server: {bandwidth: 10Gbps, latency: 20us, update_time: 1ms}
device_types:
  g: {memory: 8GiB, compute: {t0: 4ms, per_sample: 0.5ms}}
nodes:
  - {name: a, link: {bandwidth: 8GB/s, latency: 5us}, devices: [{type: g, count: 2}]}
  - {name: b, devices: [{type: g, count: 2, slowdown: 1.5, comm_slowdown: 2}]}
jitter: {cv: 0.1}
events:
  - {at: 1s, worker: 1, slowdown: 2, comm_slowdown: 3}
YAML
}
range_case() { # range_case NAME LINE_NO NEW_LINE WANT_IN_MESSAGE
  base_cluster | awk -v n="$2" -v l="$3" 'NR == n { print l; next } { print }' >"$TMP/r.yaml"
  expect_exit "range_$1" 2 "$HETSIM" sim --cluster "$TMP/r.yaml" --model mlp --policy ssgd --global-batch 8 \
    --iterations 3 --db "$TMP/n.db"
  check "range_$1_position" has err "r.yaml:$2:"
  check "range_$1_field" has err "$4"
}
base_cluster >"$TMP/r.yaml"
expect_exit range_base_ok 0 "$HETSIM" sim --cluster "$TMP/r.yaml" --model mlp --policy ssgd --global-batch 8 --iterations 3 --db "$DB"
range_case bandwidth 2 'network: {bandwidth: 1e-300, latency: 20us}' network.bandwidth
range_case latency 2 'network: {bandwidth: 10Gbps, latency: 1e308}' network.latency
range_case ps_bandwidth 3 'parameter_server: {bandwidth: 0, latency: 20us}' parameter_server.bandwidth
range_case ps_update 3 'parameter_server: {update_time: 1e300s}' parameter_server.update_time
range_case ps_accumulate 3 'parameter_server: {accumulate_time: -1ms}' parameter_server.accumulate_time
range_case ps_apply_latency 3 'parameter_server: {apply_latency: 1e10s}' parameter_server.apply_latency
range_case link_bandwidth 7 '  - {name: a, link: {bandwidth: 0.5, latency: 5us}, devices: [{type: g, count: 2}]}' 'nodes[0].link.bandwidth'
range_case group_slowdown 8 '  - {name: b, devices: [{type: g, count: 2, slowdown: 1e25}]}' 'nodes[1].devices[0].slowdown'
range_case group_comm 8 '  - {name: b, devices: [{type: g, count: 2, comm_slowdown: 1e-300}]}' 'nodes[1].devices[0].comm_slowdown'
range_case jitter 9 'jitter: {cv: 1e308}' jitter.cv
range_case event_at 11 '  - {at: 1e300s, worker: 1, slowdown: 2}' 'events[0].at'
range_case event_slowdown 11 '  - {at: 1s, worker: 1, slowdown: 1e25}' 'events[0].slowdown'
range_case event_comm 11 '  - {at: 1s, worker: 1, comm_slowdown: 1e308}' 'events[0].comm_slowdown'
printf 'at,event,worker,value,type,node\n1s,comm_slowdown,1,1e308,,\n' >"$TMP/e.csv"
expect_exit range_csv_value 2 "$HETSIM" sim --cluster "$C4" --events "$TMP/e.csv" --model mlp --policy ssgd --global-batch 8 --iterations 3 --db "$TMP/n.db"
check range_csv_value_position has err "e.csv:2:"
printf 'at,event,worker,value,type,node\n1e300s,slowdown,1,2,,\n' >"$TMP/e.csv"
expect_exit range_csv_at 2 "$HETSIM" sim --cluster "$C4" --events "$TMP/e.csv" --model mlp --policy ssgd --global-batch 8 --iterations 3 --db "$TMP/n.db"
# Real mode reads the same file: the slowdown that became a silent time_t overflow is refused.
base_cluster | awk 'NR == 11 { print "  - {at: 1s, worker: 1, slowdown: 1e25}"; next } { print }' >"$TMP/r.yaml"
expect_exit real_slowdown 2 "$HETSIM" real --model mlp --policy ssgd --global-batch 8 --iterations 2 --cluster "$TMP/r.yaml" --db "$TMP/n.db"
check real_slowdown_position has err "r.yaml:11:"
no_db ranges_nothing_stored "$TMP/n.db"

# Real mode at the door: a shard per worker, and one message prefix.
expect_exit real_train_samples 2 "$HETSIM" real --model mlp --policy ssgd --global-batch 8 --iterations 2 --workers 2 --train-samples 1 --db "$TMP/n.db"
check real_train_samples_says_why has err "--train-samples 1 is fewer than the 2 workers"
check real_train_samples_no_double_colon test "$(grep -c ': :' "$TMP/err")" = 0
no_db real_nothing_stored "$TMP/n.db"

# --- refused at once: an empty --db, a merge into itself ------------------------------------
for cmd in "sim --cluster $C4 --model mlp --policy ssgd --global-batch 8 --iterations 2" \
           "real --model mlp --policy ssgd --global-batch 8 --iterations 2" "query runs" \
           "report 1 --out $TMP/r.html" "export 1 --csv $TMP/x" "sweep --grid $TMP/none.yaml"; do
  # shellcheck disable=SC2086
  expect_exit "empty_db_${cmd%% *}" 2 timeout 20 "$HETSIM" $cmd --db ''
done
expect_exit merge_into_itself 2 timeout 20 "$HETSIM" sweep --merge "$DB" --db "$DB"
check merge_into_itself_says_why has err "is the --db database itself"

# --- output files ---------------------------------------------------------------------------
echo "precious" >"$TMP/t.json"
# A run rejected after its output was set up (resnet18 does not fit a 1 MiB device) leaves an
# existing trace untouched and no temporary file.
cat >"$TMP/tiny.yaml" <<'YAML'
name: tiny
device_types:
  g: {memory: 1MiB, compute: {t0: 1ms, per_sample: 1ms}}
nodes:
  - {name: n, devices: [{type: g, count: 2}]}
YAML
expect_exit rejected_run 2 "$HETSIM" sim --cluster "$TMP/tiny.yaml" --model resnet18 --policy ssgd --global-batch 8 --iterations 3 \
  --trace-out "$TMP/t.json" --db "$TMP/n.db"
check rejected_run_trace_kept test "$(cat "$TMP/t.json")" = precious
check rejected_run_no_tmp test -z "$(ls "$TMP" | grep 't.json.tmp')"
no_db rejected_run_nothing_stored "$TMP/n.db"
expect_exit trace_ok 0 sim --iterations 3 --trace-out "$TMP/t.json" --db "$DB"
check trace_written /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/t.json"
check trace_no_tmp test -z "$(ls "$TMP" | grep 't.json.tmp')"
cp "$DB" "$TMP/before.db"
expect_exit trace_is_db 2 sim --iterations 3 --trace-out "$DB" --db "$DB"
check trace_is_db_says_why has err "is the results database"
check trace_is_db_intact cmp -s "$DB" "$TMP/before.db"
expect_exit trace_is_db_wal 2 sim --iterations 3 --trace-out "$DB-wal" --db "$DB"
expect_exit report_is_db 2 "$HETSIM" report 1 --out "$DB" --db "$DB"
check report_is_db_intact cmp -s "$DB" "$TMP/before.db"
mkdir -p "$TMP/ex"
cp "$DB" "$TMP/ex/run.csv"
expect_exit export_is_db 2 "$HETSIM" export 1 --csv "$TMP/ex" --db "$TMP/ex/run.csv"
check export_is_db_intact cmp -s "$TMP/ex/run.csv" "$TMP/before.db"

# --- small ----------------------------------------------------------------------------------
expect_exit policy_twice 2 sim --iterations 3 --policy asp --db "$TMP/n.db"
expect_exit policy_empty_params 2 "$HETSIM" sim --cluster "$C4" --model mlp --policy ssgd: --global-batch 8 --iterations 3 --db "$TMP/n.db"
expect_exit policy_trailing_comma 2 "$HETSIM" sim --cluster "$C4" --model mlp --policy ssgd:overlap=1, --global-batch 8 --iterations 3 --db "$TMP/n.db"
expect_exit conv_empty_params 2 sim --iterations 3 --convergence analytic: --db "$TMP/n.db"
expect_exit real_policy_twice 2 "$HETSIM" real --model mlp --policy ssgd --policy asp --global-batch 8 --iterations 2 --db "$TMP/n.db"
no_db small_nothing_stored "$TMP/n.db"
# The cost of big inputs, bounded: a YAML cluster file past 16 MiB (libyaml holds ~33 times the
# text), and predbatch's gru past hidden^2 x bptt = 4194304.
{ base_cluster; yes '# padding for a cluster file past the YAML limit' | head -c 17000000; } >"$TMP/huge.yaml"
expect_exit huge_yaml 2 "$HETSIM" sim --cluster "$TMP/huge.yaml" --model mlp --policy ssgd --global-batch 8 --iterations 3 --db "$TMP/n.db"
check huge_yaml_says_why has err "at most 16777216 bytes"
rm -f "$TMP/huge.yaml"
expect_exit gru_cost 2 "$HETSIM" sim --cluster "$C4" --model resnet18 --global-batch 64 --iterations 3 --policy predbatch:predictor=gru,hidden=256,bptt=1024 --db "$TMP/n.db"
check gru_cost_says_why has err "hidden^2 x bptt may be at most 4194304"
no_db cost_nothing_stored "$TMP/n.db"
expect_exit gru_within 0 "$HETSIM" sim --cluster "$C4" --model resnet18 --global-batch 64 --iterations 3 --policy predbatch:predictor=gru,hidden=64,bptt=1024 --db "$DB"
# A dropped summary table, or a trigger that aborts the summary's insert: the run ends failed,
# not running, and says why.
cp "$TMP/before.db" "$TMP/drop.db"
sqlite3 "$TMP/drop.db" "DROP TABLE summary"
expect_exit dropped_summary 1 sim --iterations 3 --db "$TMP/drop.db"
check dropped_summary_failed test "$(sqlite3 "$TMP/drop.db" "SELECT status FROM run ORDER BY id DESC LIMIT 1")" = failed
cp "$TMP/before.db" "$TMP/trig.db"
sqlite3 "$TMP/trig.db" "CREATE TRIGGER no_sum BEFORE INSERT ON summary BEGIN SELECT RAISE(ABORT, 'no summaries'); END"
expect_exit aborting_trigger 1 sim --iterations 3 --db "$TMP/trig.db"
check aborting_trigger_failed test "$(sqlite3 "$TMP/trig.db" "SELECT status || ':' || (error LIKE '%no summaries%') FROM run ORDER BY id DESC LIMIT 1")" = "failed:1"

cli_finish
