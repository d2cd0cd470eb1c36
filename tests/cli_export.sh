#!/usr/bin/env bash
# CLI tests for `hetsim export` (one RFC 4180 CSV per table of a run, read back by Python's csv
# module and compared with the database) and for the `hetsim query` verbs and filters that
# serve the same users: runs --policy/--kind/--status, evals ID, steps ID --limit, and the
# note on runs that are not complete.
# Usage: bash tests/cli_export.sh /path/to/hetsim /path/to/source-dir
# Fails at once when `hetsim sim` cannot make runs.
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
DB="$TMP/e.db"

sim() { "$HETSIM" sim --cluster "$SRC/traces/lbb-4gpu.yaml" --model resnet18 --global-batch 256 --db "$DB" "$@" >/dev/null 2>>"$TMP/simerr"; }
if ! sim --policy ssgd --iterations 6; then
  bad setup.ssgd "hetsim sim failed: $(head -c 300 "$TMP/simerr")"
  cli_finish
fi
sim --policy ssp:s=2 --iterations 6 || bad setup.ssp "$(tail -c 300 "$TMP/simerr")"
have_conv=0
if sim --policy ssgd --iterations 30 --convergence analytic; then have_conv=1; fi

# --- export --------------------------------------------------------------------------------
OUT="$TMP/csv"
run export.run 0 export 2 --csv "$OUT" --db "$DB" &&
  check export.files bash -c "for t in run summary worker step eval validation; do test -f '$OUT/'\$t.csv || exit 1; done"
check export.lists bash -c "[ \$(wc -l < '$TMP/out') -eq 6 ] && grep -q 'step.csv\$' '$TMP/out'"
check export.crlf bash -c "head -1 '$OUT/step.csv' | od -c | grep -q '\\\\r  *\\\\n'"
check export.headers bash -c "head -1 '$OUT/eval.csv' | tr -d '\\r' | grep -qx 'id,run_id,time_s,step,loss,accuracy' &&
  head -1 '$OUT/validation.csv' | tr -d '\\r' | grep -q '^id,run_id,sim_run_id,median_iter_error'"
check export.empty_tables bash -c "[ \$(wc -l < '$OUT/eval.csv') -eq 1 ] && [ \$(wc -l < '$OUT/validation.csv') -eq 1 ]"
check export.no_tmp bash -c "! ls '$OUT' | grep -q '\\.tmp\\.'"
if command -v python3 >/dev/null && python3 -c "import csv, sqlite3" 2>/dev/null; then
  # Every exported table equals the database's rows, value for value (reals exactly: CSV
  # keeps their shortest round-trip form), and the quoted multi-line cluster YAML survives.
  if python3 - "$DB" "$OUT" 2 <<'EOF'; then ok export.roundtrip; else bad export.roundtrip "CSV differs from the database"; fi
import csv, sqlite3, sys
db, out, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = sqlite3.connect(db)
queries = {
    "run": ("SELECT * FROM run WHERE id = ?", (run,)),
    "summary": ("SELECT * FROM summary WHERE run_id = ?", (run,)),
    "worker": ("SELECT * FROM worker WHERE run_id = ? ORDER BY idx", (run,)),
    "step": ("SELECT * FROM step WHERE run_id = ? ORDER BY step, worker", (run,)),
}
def text(v):
    return "" if v is None else repr(v) if isinstance(v, float) else str(v)
for table, (sql, args) in queries.items():
    cur = c.execute(sql, args)
    head = [d[0] for d in cur.description]
    rows = [[text(v) for v in r] for r in cur.fetchall()]
    with open("%s/%s.csv" % (out, table), newline="") as f:
        got = list(csv.reader(f))
    assert got[0] == head, (table, got[0], head)
    assert len(got) - 1 == len(rows) and rows, (table, len(got), len(rows))
    for g, w in zip(got[1:], rows):
        for a, b, name in zip(g, w, head):
            if a != b and not (a and b and float(a) == float(b)):
                raise SystemExit("%s.%s: csv %r, db %r" % (table, name, a, b))
    if table == "run":
        assert "\n" in got[1][head.index("cluster_text")], "cluster_text lost its lines"
EOF
fi
if [ $have_conv = 1 ]; then
  run export.evals 0 export 3 --csv "$TMP/c3" --db "$DB" &&
    check export.evals.rows bash -c "[ \$(wc -l < '$TMP/c3/eval.csv') -gt 1 ]"
fi
# A rerun replaces the files; validation rows of either side of a pair are exported.
run export.again 0 export 2 --csv "$OUT" --db "$DB" && check export.again.same test -s "$OUT/run.csv"

run export.unknown 2 export 99 --csv "$TMP/nope" --db "$DB" &&
  check export.unknown.msg bash -c "grep -q 'no run 99 in' '$TMP/err' && test ! -e '$TMP/nope'"
run export.notid 2 export x1 --csv "$TMP/nope" --db "$DB" && check export.notid.msg grep -q 'not a run ID' "$TMP/err"
run export.nocsv 2 export 1 --db "$DB" && check export.nocsv.msg grep -q -- '--csv DIR is required' "$TMP/err"
run export.norun 2 export --csv "$TMP/nope" --db "$DB" && check export.norun.msg grep -q 'missing run ID' "$TMP/err"
run export.two 2 export 1 2 --csv "$TMP/nope" --db "$DB" && check export.two.msg grep -q 'one run per export' "$TMP/err"
run export.nodb 2 export 1 --csv "$TMP/nope" --db "$TMP/none.db" && check export.nodb.nofile test ! -e "$TMP/none.db"
run export.noparent 2 export 1 --csv "$TMP/no/such" --db "$DB" && check export.noparent.msg grep -q 'cannot create the folder' "$TMP/err"
run export.help 0 export --help && check export.help.text grep -q 'usage: hetsim export' "$TMP/out"

# --- query: filters, evals, steps ----------------------------------------------------------
run query.policy 0 query --db "$DB" runs --policy ssp --csv &&
  check query.policy.rows bash -c "[ \$(wc -l < '$TMP/out') -eq 2 ] && grep -q ',ssp,' '$TMP/out'"
run query.kind 0 query --db "$DB" runs --kind real --csv && check query.kind.none bash -c "[ \$(wc -l < '$TMP/out') -eq 1 ]"
run query.status 0 query --db "$DB" runs --status complete --csv &&
  check query.status.rows bash -c "[ \$(tr -d '\\r' < '$TMP/out' | grep -c ',complete,') -eq \$(( \$(wc -l < '$TMP/out') - 1 )) ]"
run query.kind.bad 2 query --db "$DB" runs --kind gpu && check query.kind.bad.msg grep -q 'expected sim or real' "$TMP/err"
run query.status.bad 2 query --db "$DB" runs --status done && check query.status.bad.msg grep -q 'expected running, complete' "$TMP/err"
run query.filter.verb 2 query --db "$DB" run 1 --policy ssgd && check query.filter.verb.msg grep -q 'filter `runs` and `groups` only' "$TMP/err"
run query.steps 0 query --db "$DB" steps 1 --limit 5 --csv &&
  check query.steps.rows bash -c "[ \$(wc -l < '$TMP/out') -eq 6 ] && head -1 '$TMP/out' | tr -d '\\r' | grep -qx 'step,worker,batch,start_s,compute_end_s,comm_end_s,wait_s,model_version,staleness,loss'"
run query.steps.all 0 query --db "$DB" steps 1 --json &&
  check query.steps.all.rows bash -c "[ \$(grep -o '\"worker\"' '$TMP/out' | wc -l) -eq 24 ]"
run query.limit.bad 2 query --db "$DB" steps 1 --limit -3 && check query.limit.bad.msg grep -q 'expected a count' "$TMP/err"
run query.limit.verb 2 query --db "$DB" runs --limit 3 && check query.limit.verb.msg grep -q 'applies to `evals` and `steps` only' "$TMP/err"
run query.evals.none 0 query --db "$DB" evals 1 --csv && check query.evals.none.header bash -c "tr -d '\\r' < '$TMP/out' | grep -qx 'time_s,step,loss,accuracy' && [ \$(wc -l < '$TMP/out') -eq 1 ]"
if [ $have_conv = 1 ]; then
  run query.evals 0 query --db "$DB" evals 3 && check query.evals.rows bash -c "[ \$(wc -l < '$TMP/out') -gt 3 ]"
fi
run query.evals.unknown 2 query --db "$DB" evals 77 && check query.evals.unknown.msg grep -q 'no run 77' "$TMP/err"

# A run stopped without finishing (as after kill -9) stays 'running': `runs` says what that
# means. The row is made with Python's sqlite3, as a crashed hetsim would leave it.
if command -v python3 >/dev/null && python3 -c "import sqlite3" 2>/dev/null; then
  python3 - "$DB" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("INSERT INTO run (kind, policy, params, cluster_name, cluster_path, cluster_text, model,"
          " global_batch, seed, command, status, started_at) SELECT kind, policy, params,"
          " cluster_name, cluster_path, cluster_text, model, global_batch, seed, command,"
          " 'running', started_at FROM run WHERE id = 1")
c.commit()
EOF
  run query.incomplete 0 query --db "$DB" runs &&
    check query.incomplete.note bash -c "grep -q '1 run is not complete' '$TMP/out' && grep -q 'kill -9' '$TMP/out'"
  run query.incomplete.csv 0 query --db "$DB" runs --csv && check query.incomplete.csv.clean bash -c "! grep -q 'not complete' '$TMP/out'"
  run query.running 0 query --db "$DB" runs --status running --csv && check query.running.one bash -c "[ \$(wc -l < '$TMP/out') -eq 2 ]"
fi

cli_finish
