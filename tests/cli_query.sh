#!/usr/bin/env bash
# CLI tests for `hetsim query`: every verb in every output format, every bad-usage exit code,
# and that a write statement is refused and changes nothing.
# Usage: bash tests/cli_query.sh /path/to/hetsim /path/to/source-dir
# The fixture database comes from the test_store program beside hetsim (HETSIM_STORE_FIXTURE),
# which writes known numbers; when `hetsim sim` works, runs it makes are queried too. Fails at
# once when neither is available.
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=query.
DB="$TMP/q.db"

FIXTURE_BIN="$(dirname "$HETSIM")/test_store"
if [ -x "$FIXTURE_BIN" ] && HETSIM_STORE_FIXTURE="$DB" "$FIXTURE_BIN" >/dev/null; then
  have_fixture=1
else
  have_fixture=0
fi
have_sim=0
if "$HETSIM" sim --cluster "$SRC/traces/lbb-4gpu.yaml" --model resnet18 --policy ssgd \
  --global-batch 64 --iterations 5 --db "$DB" >/dev/null 2>"$TMP/simerr"; then
  have_sim=1
fi
if [ $have_fixture = 0 ] && [ $have_sim = 0 ]; then
  bad setup "no fixture program ($FIXTURE_BIN) and hetsim sim failed: $(head -c 200 "$TMP/simerr")"
  cli_finish
fi

# --- help ----------------------------------------------------------------------------------
run help 0 query --help && check help has out "compare A B" && has out "--csv" && has out "exit status"

if [ $have_fixture = 1 ]; then
  # --- runs ----------------------------------------------------------------------------------
  run runs.text 0 query --db "$DB" runs &&
    check runs.text bash -c "head -1 '$TMP/out' | grep -q '^id  *kind  *policy  *params  *cluster  *model  *workers  *iterations  *sim_time_s  *status  *started_at' && grep -q 'lbb  *k=2' '$TMP/out'"
  run runs.csv 0 query runs --csv --db "$DB" &&
    check runs.csv bash -c "head -1 '$TMP/out' | tr -d '\r' | grep -qx 'id,kind,policy,params,cluster,model,workers,iterations,sim_time_s,status,started_at' &&
      grep -qF '2,sim,lbb,\"k=2,note=\"\"a, b\"\"\",lbb-4gpu,resnet18,4,5,1,complete,' '$TMP/out' &&
      grep -qF '3,real,ssgd,,lbb-4gpu,resnet18,,,,incomplete,' '$TMP/out'"
  run runs.json 0 query runs --json --db "$DB" &&
    check runs.json bash -c "grep -qF '\"id\":1,\"kind\":\"sim\",\"policy\":\"ssgd\"' '$TMP/out' &&
      grep -qF '\"params\":\"k=2,note=\\\"a, b\\\"\"' '$TMP/out' && grep -qF '\"workers\":null' '$TMP/out' &&
      grep -qF '\"sim_time_s\":2,' '$TMP/out' && head -c1 '$TMP/out' | grep -q '\\['"
  if command -v python3 >/dev/null; then
    check runs.json.parses python3 -c "import json,sys; r=json.load(open('$TMP/out')); assert len(r)>=3 and r[2]['status']=='incomplete' and r[0]['iterations']==5"
  fi

  # --- run ID --------------------------------------------------------------------------------
  run run.text 0 query --db "$DB" run 2 &&
    check run.text bash -c "grep -q '^run 2' '$TMP/out' && grep -q '^summary' '$TMP/out' && grep -q '^workers' '$TMP/out' && grep -q 'gtx750' '$TMP/out' && grep -q 'final_loss  *0.5' '$TMP/out'"
  run run.csv 0 query --db "$DB" run 1 --csv &&
    check run.csv bash -c "tr -d '\r' < '$TMP/out' | grep -qx 'run_id,workers,iterations,events,samples,sim_time_s,mean_iteration_s,samples_per_s,wait_fraction,wall_s,final_loss,final_accuracy,time_to_target_s' &&
      tr -d '\r' < '$TMP/out' | grep -qx '1,4,5,100,320,2,0.4,160,0.25,0.01,,,' && tr -d '\r' < '$TMP/out' | grep -qx '1,1,gtx750,server0,0,,32,5,160,2,0,0.1'"
  run run.json 0 query --db "$DB" run 3 --json &&
    check run.json bash -c "grep -qF '\"summary\":null' '$TMP/out' && grep -qF '\"workers\":[]' '$TMP/out' && grep -qF '\"status\":\"running\"' '$TMP/out'"
  if command -v python3 >/dev/null; then
    run run.json.parse 0 query --db "$DB" run 1 --json &&
      check run.json.parses python3 -c "import json; r=json.load(open('$TMP/out')); assert r['run']['id']==1 and r['summary']['wait_fraction']==0.25 and len(r['workers'])==2 and r['workers'][0]['left_at_s'] is None"
  fi

  # --- compare -------------------------------------------------------------------------------
  run compare.text 0 query --db "$DB" compare 1 2 &&
    check compare.text bash -c "grep -q '^sim_time_s  *2  *1  *0.5' '$TMP/out' && grep -q '^samples_per_s  *160  *320  *2' '$TMP/out'"
  run compare.csv 0 query --db "$DB" compare 1 2 --csv &&
    check compare.csv bash -c "tr -d '\r' < '$TMP/out' | grep -qx 'metric,a,b,ratio' && tr -d '\r' < '$TMP/out' | grep -qx 'sim_time_s,2,1,0.5' && tr -d '\r' < '$TMP/out' | grep -qx 'final_loss,,0.5,'"
  run compare.json 0 query --db "$DB" compare 1 2 --json &&
    check compare.json bash -c "grep -qF '{\"metric\":\"samples_per_s\",\"a\":160,\"b\":320,\"ratio\":2}' '$TMP/out' && grep -qF '{\"metric\":\"final_loss\",\"a\":null,\"b\":0.5,\"ratio\":null}' '$TMP/out'"

  # --- sql -----------------------------------------------------------------------------------
  run sql.text 0 query --db "$DB" sql "SELECT policy, count(*) AS n FROM run GROUP BY policy ORDER BY policy" &&
    check sql.text bash -c "grep -q '^lbb  *1' '$TMP/out' && grep -q '^policy  *n' '$TMP/out'"
  run sql.csv 0 query --db "$DB" sql "SELECT 'a,b' AS x, 'say \"hi\"' AS y, 'l1'||char(10)||'l2' AS z, NULL AS n, 1.5 AS r" --csv &&
    check sql.csv bash -c "printf 'x,y,z,n,r\r\n\"a,b\",\"say \"\"hi\"\"\",\"l1\nl2\",,1.5\r\n' | cmp -s - '$TMP/out'"
  run sql.json 0 query --db "$DB" --json sql "SELECT 1 AS i, 2.5 AS r, 'x' AS t, NULL AS n" &&
    check sql.json bash -c "grep -qxF '[{\"i\":1,\"r\":2.5,\"t\":\"x\",\"n\":null}]' '$TMP/out'"
  run sql.delete 2 query --db "$DB" sql "DELETE FROM run" &&
    check sql.delete.message has err "hetsim query: sql: refusing a statement that writes"
  run sql.delete.rows 0 query --db "$DB" sql "SELECT count(*) AS n FROM run" --csv &&
    check sql.delete.rows_remain bash -c "tr -d '\r' < '$TMP/out' | grep -qx '[3-9]'"
  run sql.two 2 query --db "$DB" sql "SELECT 1; DELETE FROM run" && check sql.two has err "one statement"
  run sql.syntax 2 query --db "$DB" sql "SELEKT 1" && check sql.syntax has err "hetsim query: sql:"
  run sql.attach 1 query --db "$DB" sql "ATTACH '$TMP/other.db' AS o" && check sql.attach.nofile test ! -e "$TMP/other.db"
fi

if [ $have_sim = 1 ]; then
  run sim.runs 0 query --db "$DB" runs --csv && check sim.runs has out ",ssgd,"
  SIMID=$(tr -d '\r' < "$TMP/out" | awk -F, 'NR>1 && $2=="sim" {id=$1} END {print id}')
  run sim.run 0 query --db "$DB" run "$SIMID" && check sim.run.complete has out "complete"
fi

# --- bad usage -----------------------------------------------------------------------------
run usage.noverb 2 query --db "$DB" && check usage.noverb has err "hetsim query: missing verb"
run usage.verb 2 query --db "$DB" frobnicate && check usage.verb has err "hetsim query: unknown verb"
run usage.option 2 query --db "$DB" runs --bogus && check usage.option has err "unknown option"
# --- groups and compare of several runs ----------------------------------------------------
# Runs that differ only in the seed: three of ssgd and two of asp on a cluster with jitter (so
# the seeds give different times), one ssgd at another batch (its own group).
G="$TMP/g.db"
sed 's/jitter: {cv: 0.0}/jitter: {cv: 0.2}/' "$SRC/traces/lbb-4gpu.yaml" > "$TMP/jit.yaml"
for s in 1 2 3; do "$HETSIM" sim --cluster "$TMP/jit.yaml" --model resnet18 --policy ssgd --global-batch 64 --iterations 6 --seed $s --db "$G" >/dev/null 2>&1; done
for s in 1 2; do "$HETSIM" sim --cluster "$TMP/jit.yaml" --model resnet18 --policy asp --global-batch 64 --iterations 6 --seed $s --db "$G" >/dev/null 2>&1; done
"$HETSIM" sim --cluster "$TMP/jit.yaml" --model resnet18 --policy ssgd --global-batch 128 --iterations 6 --seed 1 --db "$G" >/dev/null 2>&1
run groups.csv 0 query --db "$G" groups --csv
tr -d '\r' < "$TMP/out" > "$TMP/gcsv"
check groups.header grep -qx 'group,kind,policy,params,cluster,model,global_batch,runs,seeds,run_ids,metric,n,mean,sd,min,max' "$TMP/gcsv"
check groups.count test "$(grep -c ',sim_time_s,' "$TMP/gcsv")" -eq 3
check groups.ssgd grep -q '^1,sim,ssgd,.*,64,3,"1,2,3","1,2,3",sim_time_s,3,' "$TMP/gcsv"
check groups.asp grep -q '^4,sim,asp,,lbb-4gpu,resnet18,64,2,"1,2","4,5",sim_time_s,2,' "$TMP/gcsv"
check groups.single grep -q '^6,sim,ssgd,.*,128,1,1,6,sim_time_s,1,.*,0,' "$TMP/gcsv"
# mean and sample sd of group 1 against the three runs' own times, computed here.
t=$(rows "$G" "SELECT sim_time_s FROM summary WHERE run_id IN (1, 2, 3) ORDER BY run_id" | tr '\n' ' ')
want=$(echo "$t" | awk '{m = ($1 + $2 + $3) / 3; v = (($1-m)^2 + ($2-m)^2 + ($3-m)^2) / 2; printf "%.9f %.9f", m, sqrt(v)}')
got=$(grep '^1,.*,sim_time_s,' "$TMP/gcsv" | awk -F, '{n = NF; printf "%.9f %.9f", $(n-3), $(n-2)}')
check groups.mean_sd test "$want" = "$got"
check groups.spread test "$(echo "$want" | awk '{print ($2 > 0)}')" = 1
run groups.policy 0 query --db "$G" groups --policy asp --json &&
  check groups.policy bash -c "grep -q '\"policy\":\"asp\"' '$TMP/out' && ! grep -q '\"policy\":\"ssgd\"' '$TMP/out'"
run groups.failed 0 query --db "$G" groups --status failed --csv &&
  check groups.failed test "$(tr -d '\r' < "$TMP/out" | wc -l)" -eq 1
run groups.text 0 query --db "$G" groups && check groups.text has out "time_to_target_s"
run compare.three 0 query --db "$G" compare 1 2 4 --csv &&
  check compare.three bash -c "tr -d '\r' < '$TMP/out' | grep -qx 'metric,run1,run2,run4,run2/run1,run4/run1'"
r=$(rows "$G" "SELECT printf('%.6f', b.sim_time_s / a.sim_time_s) FROM summary a, summary b WHERE a.run_id = 1 AND b.run_id = 4")
check compare.three.ratio test "$(tr -d '\r' < "$TMP/out" | awk -F, '$1 == "sim_time_s" {printf "%.6f", $6}')" = "$r"
run usage.compare.many 2 query --db "$G" compare $(seq 1 65) && check usage.compare.many has err "at most 64 runs"
run usage.compare.unknown3 2 query --db "$G" compare 1 2 99 && check usage.compare.unknown3 has err "no run 99"

run usage.extra 2 query --db "$DB" runs extra && check usage.extra has err "too many arguments"
run usage.run.missing 2 query --db "$DB" run && check usage.run.missing has err "missing argument"
run usage.run.nonnum 2 query --db "$DB" run abc && check usage.run.nonnum has err "not a run ID"
run usage.run.unknown 2 query --db "$DB" run 99999 && check usage.run.unknown has err "no run 99999"
run usage.compare.one 2 query --db "$DB" compare 1 && check usage.compare.one has err "missing argument"
run usage.compare.unknown 2 query --db "$DB" compare 1 99999 && check usage.compare.unknown has err "no run 99999"
run usage.sql.missing 2 query --db "$DB" sql && check usage.sql.missing has err "missing argument"
run usage.twoformats 2 query --db "$DB" runs --csv --json && check usage.twoformats has err "at most one"
run usage.nodb 2 query --db "$TMP/missing.db" runs &&
  check usage.nodb bash -c "grep -qF 'does not exist' '$TMP/err' && test ! -e '$TMP/missing.db'"
run usage.db.noarg 2 query runs --db && check usage.db.noarg has err "needs a FILE"
printf 'not a database, just text\n%.0s' $(seq 1 100) >"$TMP/junk.db"
run runtime.notadb 1 query --db "$TMP/junk.db" runs && check runtime.notadb has err "not an SQLite database"

cli_finish
