#!/usr/bin/env bash
# Hardening tests (docs/reliability.md): concurrent writers lose no rows; kill -9 in the middle
# of a run (and of a sweep) leaves an intact database with the run shown as incomplete; a
# read-only folder, a full disk and a database from a newer schema each give a clear error and
# exit status and lose nothing already stored.
# Usage: bash tests/cli_hardening.sh /path/to/hetsim /path/to/source-dir
# The read-only and full-disk cases mount a small tmpfs (root) and are skipped where mounting
# is not permitted; python3's sqlite3 module writes the newer-schema file.
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=hardening.
MNT=""
trap '[ -n "$MNT" ] && umount "$MNT" 2>/dev/null; cli_cleanup' EXIT
C4="$SRC/traces/lbb-4gpu.yaml"
BIG="$SRC/traces/hetero-1024gpu.yaml"
sim() { "$HETSIM" sim --cluster "$C4" --model resnet18 --global-batch 128 "$@"; }
# wait_for DB SQL: polls until the query prints a non-empty, non-zero value (at most ~60 s).
wait_for() {
  for _ in $(seq 600); do
    v=$(rows "$1" "$2" 2>/dev/null)
    [ -n "$v" ] && [ "$v" != 0 ] && return 0
    sleep 0.1
  done
  return 1
}

# --- 8 concurrent writers ------------------------------------------------------------------
# Each writes a run of 300 iterations x 4 workers = 1,200 step rows into one fresh file; they
# all create and migrate it at once.
DB="$TMP/c.db"
pids=()
for i in 1 2 3 4 5 6 7 8; do
  sim --policy ssgd --iterations 300 --seed "$i" --db "$DB" >"$TMP/w$i.out" 2>"$TMP/w$i.err" &
  pids+=($!)
done
# A reader runs beside them.
"$HETSIM" query --db "$DB" runs >/dev/null 2>&1
st=0
for p in "${pids[@]}"; do wait "$p" || st=1; done
check concurrent.all_exit_0 test $st -eq 0
for i in 1 2 3 4 5 6 7 8; do [ -s "$TMP/w$i.err" ] && echo "  writer $i: $(head -c 300 "$TMP/w$i.err")"; done
check concurrent.runs test "$(rows "$DB" "SELECT count(*) FROM run WHERE status = 'complete'")" -eq 8
check concurrent.steps test "$(rows "$DB" "SELECT count(*) FROM step")" -eq $((8 * 1200))
check concurrent.steps_per_run test "$(rows "$DB" "SELECT count(DISTINCT n) || ':' || min(n) FROM (SELECT count(*) AS n FROM step GROUP BY run_id)")" = "1:1200"
check concurrent.workers test "$(rows "$DB" "SELECT count(*) FROM worker")" -eq 32
check concurrent.integrity test "$(rows "$DB" "PRAGMA integrity_check")" = ok

# --- kill -9 in the middle of a run ---------------------------------------------------------
K="$TMP/k.db"
sim --policy ssgd --iterations 3 --db "$K" >/dev/null 2>&1   # one complete run first
"$HETSIM" sim --cluster "$BIG" --model resnet18 --policy ssgd --global-batch 8192 \
  --iterations 1000000 --db "$K" >/dev/null 2>&1 &
kp=$!
wait_for "$K" "SELECT count(*) FROM step WHERE run_id = 2"
check kill.started test $? -eq 0
check kill.shows_running test "$(rows "$K" "SELECT status FROM run WHERE id = 2")" = running
"$HETSIM" query --db "$K" --csv runs >"$TMP/runs.csv"
check kill.running_while_alive grep -q '^2,.*,running,' "$TMP/runs.csv"
kill -9 "$kp"
wait "$kp" 2>/dev/null
check kill.integrity test "$(rows "$K" "PRAGMA integrity_check")" = ok
"$HETSIM" query --db "$K" --csv runs >"$TMP/runs.csv"
check kill.query_incomplete grep -q '^2,.*,incomplete,' "$TMP/runs.csv"
check kill.first_intact grep -q '^1,.*,complete,' "$TMP/runs.csv"
check kill.stored_status test "$(rows "$K" "SELECT status FROM run WHERE id = 2")" = running
check kill.no_summary test "$(rows "$K" "SELECT count(*) FROM summary WHERE run_id = 2")" -eq 0
check kill.steps_kept test "$(rows "$K" "SELECT count(*) FROM step WHERE run_id = 2")" -gt 0
"$HETSIM" query --db "$K" --json runs >"$TMP/runs.json"
check kill.json grep -q '"status":"incomplete"' "$TMP/runs.json"
sim --policy ssgd --iterations 3 --db "$K" >/dev/null 2>&1
check kill.db_usable_after test "$(rows "$K" "SELECT status FROM run WHERE id = 3")" = complete

# --- kill -9 in the middle of a sweep, then resume -------------------------------------------
cat > "$TMP/grid.yaml" <<YAML
clusters: [$BIG]
policies: [ssgd, {name: localsgd, params: {tau: [2, 4]}}]
seeds: [1, 2]
model: resnet18
global_batch: 8192
iterations: 1500   # long enough that the kill below lands mid-sweep on an idle machine
YAML
S="$TMP/s.db"
# In its own process group, so that one kill -9 takes the sweep and its workers.
setsid "$HETSIM" sweep --grid "$TMP/grid.yaml" --db "$S" --jobs 2 >"$TMP/sweep1.out" 2>&1 &
sp=$!
# A point counts as done once its complete run is tagged with the point's key, which the sweep
# does just after the run ends (cli/cmd_sweep.c): a kill between the two leaves an untagged run,
# and the resume rightly runs that point again. So wait for a tagged one.
wait_for "$S.w0" "SELECT count(*) FROM run WHERE status = 'complete' AND json_extract(options, '\$.sweep_point') IS NOT NULL"
kill -9 -- "-$sp" 2>/dev/null
wait "$sp" 2>/dev/null
# wait returns when the sweep itself is gone; its workers, killed too, may still be exiting
# with the shard lock open. Resume once the whole group is gone (at most ~10 s).
for _ in $(seq 100); do kill -0 -- "-$sp" 2>/dev/null || break; sleep 0.1; done
check sweep_kill.left_shards test -e "$S.w0"
"$HETSIM" sweep --grid "$TMP/grid.yaml" --db "$S" --jobs 2 >"$TMP/sweep2.out" 2>&1
check sweep_kill.resume_exit test $? -eq 0 || head -c 800 "$TMP/sweep2.out"
check sweep_kill.resumed_some test "$(grep -c '^point ' "$TMP/sweep2.out")" -lt 6
check sweep_kill.complete test "$(rows "$S" "SELECT count(DISTINCT json_extract(options, '\$.sweep_point')) FROM run WHERE status = 'complete'")" -eq 6
check sweep_kill.no_dup test "$(rows "$S" "SELECT count(*) FROM run WHERE status = 'complete'")" -eq 6
check sweep_kill.integrity test "$(rows "$S" "PRAGMA integrity_check")" = ok
check sweep_kill.no_shards test -z "$(ls "$TMP" | grep -E '^s\.db\.w')"

# --- a database from a newer schema -----------------------------------------------------------
if command -v python3 >/dev/null; then
  N="$TMP/n.db"
  sim --policy ssgd --iterations 3 --db "$N" >/dev/null 2>&1
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('UPDATE schema_version SET version = 99'); c.commit(); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" "$N"
  sum0=$(cksum <"$N")
  sim --policy ssgd --iterations 3 --db "$N" >/dev/null 2>"$TMP/err"
  check newer.sim_exit test $? -eq 1
  check newer.sim_msg grep -q "schema version 99, this hetsim knows up to" "$TMP/err"
  "$HETSIM" sweep --grid "$TMP/grid.yaml" --db "$N" >/dev/null 2>"$TMP/err"
  check newer.sweep_exit test $? -eq 1
  check newer.sweep_msg grep -q "upgrade hetsim" "$TMP/err"
  "$HETSIM" query --db "$N" runs >/dev/null 2>"$TMP/err"
  check newer.query_exit test $? -eq 1
  check newer.untouched test "$(cksum <"$N")" = "$sum0"
else
  echo "skip hardening.newer: no python3"
fi

# --- read-only folder and full disk (a small tmpfs) -------------------------------------------
MNT="$TMP/mnt"
mkdir -p "$MNT"
if mount -t tmpfs -o size=2m tmpfs "$MNT" 2>/dev/null; then
  F="$MNT/f.db"
  sim --policy ssgd --iterations 10 --db "$F" >/dev/null 2>&1
  check full.first_run test "$(rows "$F" "SELECT status FROM run")" = complete
  sim --policy ssgd --iterations 20000 --db "$F" >/dev/null 2>"$TMP/err"
  check full.exit test $? -eq 1
  check full.msg grep -q "database or disk is full" "$TMP/err"
  check full.integrity test "$(rows "$F" "PRAGMA integrity_check")" = ok
  check full.first_intact test "$(rows "$F" "SELECT status || ':' || (SELECT count(*) FROM step WHERE run_id = 1) FROM run WHERE id = 1")" = "complete:40"
  check full.second_not_complete test "$(rows "$F" "SELECT count(*) FROM run WHERE id = 2 AND status = 'complete'")" -eq 0
  "$HETSIM" query --db "$F" --csv runs >"$TMP/runs.csv"
  # Marked failed when the status update still fitted, otherwise left running by a process
  # that is gone: shown incomplete. Never running, never complete.
  check full.shown_not_complete grep -qE '^2,.*,(incomplete|failed),' "$TMP/runs.csv"
  rm -f "$F" "$F-wal" "$F-shm"
  # A trace that does not fit: exit 1, the existing trace as it was, no half file left.
  echo precious >"$MNT/t.json"
  sim --policy ssgd --iterations 20000 --store summary --trace-out "$MNT/t.json" --db "$TMP/trace.db" >/dev/null 2>"$TMP/err"
  check full.trace_exit test $? -eq 1
  check full.trace_msg grep -q "trace-out" "$TMP/err"
  check full.trace_kept test "$(cat "$MNT/t.json")" = precious
  check full.trace_no_tmp test -z "$(ls "$MNT" | grep 't.json.tmp')"
  rm -f "$MNT/t.json"
  sim --policy ssgd --iterations 10 --db "$F" >/dev/null 2>&1
  if mount -o remount,ro "$MNT" 2>/dev/null; then
    sim --policy ssgd --iterations 10 --db "$F" >/dev/null 2>"$TMP/err"
    check readonly.exit test $? -eq 1
    check readonly.msg grep -qE "readonly database|unable to open database file" "$TMP/err"
    sim --policy ssgd --iterations 10 --db "$MNT/new.db" >/dev/null 2>"$TMP/err"
    check readonly.new_exit test $? -eq 1
    check readonly.new_msg grep -q "cannot open database $MNT/new.db" "$TMP/err"
    "$HETSIM" sweep --grid "$TMP/grid.yaml" --db "$MNT/sw.db" >/dev/null 2>"$TMP/err"
    check readonly.sweep_exit test $? -eq 1
    check readonly.sweep_msg grep -q "cannot open database" "$TMP/err"
    check readonly.data_kept test "$(rows "$F" "SELECT count(*) || ':' || min(status) FROM run")" = "1:complete"
  else
    echo "skip hardening.readonly: remount not permitted"
  fi
  umount "$MNT" && MNT=""
else
  MNT=""
  echo "skip hardening.full, hardening.readonly: mounting a tmpfs is not permitted here"
fi

cli_finish
