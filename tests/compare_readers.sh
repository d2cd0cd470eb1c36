#!/usr/bin/env bash
# Before/after check for the commands that read the results database (query, export, report):
# makes a few databases with the OLD binary, then runs the same commands with OLD and NEW and
# compares what each printed on stdout and stderr, its exit status and the files it wrote,
# byte for byte. Also stores runs with both binaries (sim with many policies and flags, a real
# run on the cpu backend and its validation) and compares the stored run rows (options, cluster
# text, params) with the parts that name the writing process (pid, host, boot, start) blanked.
# Not a ctest entry: it needs two builds. Usage:
#   bash tests/compare_readers.sh OLD_HETSIM NEW_HETSIM SOURCE_DIR [WORK_DIR]
# Prints one line per difference and "N commands compared, M differ"; exits 1 when any differ.
set -u
OLD=$(realpath "$1") NEW=$(realpath "$2") SRC=$(realpath "$3")
W=${4:-$(mktemp -d)}
mkdir -p "$W"
export HETSIM_FASHION_MNIST_DIR=${HETSIM_FASHION_MNIST_DIR:-synthetic}
C4="$SRC/traces/lbb-4gpu.yaml"
DB="$W/a.db" VDB="$W/v.db" EDB="$W/e.db"
rm -f "$W"/*.db*

sim() { "$OLD" sim --cluster "$C4" --model resnet18 --global-batch 256 --db "$DB" "$@" >/dev/null 2>&1; }
sim --policy ssgd --iterations 20
sim --policy lbb --iterations 20
sim --policy ssp:s=2 --iterations 20
sim --policy ssgd --iterations 20 --store summary
sim --policy ssgd --iterations 20 --convergence analytic
sim --policy ssgd --iterations 20 --seed 7
sim --policy ssgd --iterations 20 --seed 8
sim --policy asp --iterations 30 --convergence analytic --target-loss 1.5
sim --policy localsgd:tau=4 --iterations 12
sim --policy dbs --iterations 40
# A run whose process is gone without finishing (status running, shown as incomplete).
python3 - "$DB" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE run SET status = 'running', options = json_set(options, '$.pid', 999999999) WHERE id = 9")
c.execute("UPDATE run SET status = 'failed', error = 'a test error' WHERE id = 10")
c.commit()
EOF
"$OLD" calib --device cpu --model mlp --batches 8,16,32 --db "$VDB" --max-reps 4 --min-reps 3 \
  --warmup 1 --comm-max 64KiB >/dev/null 2>&1
"$OLD" real --policy ssgd --model mlp --global-batch 32 --iterations 20 --workers 2 \
  --train-samples 800 --eval-samples 200 --eval-every 10 --db "$VDB" --calib "$VDB" >/dev/null 2>&1
"$OLD" validate 1 --db "$VDB" >/dev/null 2>&1
"$OLD" sim --cluster "$C4" --model resnet18 --global-batch 256 --db "$EDB" --policy ssgd --iterations 0 >/dev/null 2>&1 || true
python3 - "$DB" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("CREATE TABLE odd (t TEXT, b BLOB, r REAL)")
c.execute("INSERT INTO odd VALUES ('a\nb\tc\x01d', x'00ff10', 1e308 * 10)")
c.execute("INSERT INTO odd VALUES ('x,\"y\"', NULL, -0.1)")
c.commit()
EOF

ncmd=0 ndiff=0
# compare NAME ARGS...: runs `hetsim ARGS` with both binaries in fresh folders (so files
# they write land apart) and compares stdout, stderr, status and the folder's files.
compare() {
  local name=$1
  shift
  ncmd=$((ncmd + 1))
  for side in old new; do
    local bin=$OLD
    [ $side = new ] && bin=$NEW
    rm -rf "$W/$side" && mkdir -p "$W/$side/files"
    (cd "$W/$side/files" && "$bin" "$@" >"$W/$side/stdout" 2>"$W/$side/stderr"; echo $? >"$W/$side/rc")
    sed -i "s#$bin#HETSIM#g" "$W/$side/stderr"
  done
  if ! diff -r "$W/old" "$W/new" >"$W/diff.txt" 2>&1; then
    ndiff=$((ndiff + 1))
    echo "DIFF $name: hetsim $*"
    head -20 "$W/diff.txt"
  fi
}

for f in "" --csv --json; do
  compare "runs$f" query runs --db "$DB" $f
  compare "runs.policy$f" query runs --db "$DB" --policy ssgd $f
  compare "runs.kind$f" query runs --db "$VDB" --kind real $f
  compare "runs.status$f" query runs --db "$DB" --status running $f
  compare "groups$f" query groups --db "$DB" $f
  compare "groups.status$f" query groups --db "$DB" --status failed $f
  for id in 1 4 5 9 10; do compare "run.$id$f" query run $id --db "$DB" $f; done
  compare "run.real$f" query run 1 --db "$VDB" $f
  compare "compare2$f" query compare 1 2 --db "$DB" $f
  compare "compare2.nosum$f" query compare 1 9 --db "$DB" $f
  compare "compare4$f" query compare 1 2 3 5 --db "$DB" $f
  compare "evals$f" query evals 5 --db "$DB" $f
  compare "evals.limit$f" query evals 8 --limit 3 --db "$DB" $f
  compare "steps$f" query steps 2 --limit 9 --db "$DB" $f
  compare "steps.real$f" query steps 1 --db "$VDB" $f
  compare "sql$f" query sql "SELECT id, policy, seed, options IS NULL FROM run" --db "$DB" $f
  compare "sql.odd$f" query sql "SELECT * FROM odd" --db "$DB" $f
  compare "sql.none$f" query sql "SELECT 1 WHERE 0" --db "$DB" $f
  compare "sql.nocols$f" query sql "PRAGMA user_version = 1" --db "$DB" $f
  compare "sql.pragma$f" query sql "PRAGMA table_info(run)" --db "$DB" $f
  compare "sql.rows$f" query sql "SELECT * FROM step" --max-rows 5 --db "$DB" $f
  compare "sql.bytes$f" query sql "SELECT cluster_text FROM run" --max-bytes 100 --db "$DB" $f
  compare "sql.toobig$f" query sql "SELECT randomblob(1000)" --max-bytes 100 --db "$DB" $f
  compare "sql.time$f" query sql "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c" --time-limit 0.2s --db "$DB" $f
  compare "sql.runerr$f" query sql "SELECT json_extract('{', '\$.a')" --db "$DB" $f
  compare "sql.alive$f" query sql "SELECT id, hs_run_alive(options) FROM run" --db "$DB" $f
done
compare sql.write query sql "DELETE FROM run" --db "$DB"
compare sql.two query sql "SELECT 1; SELECT 2" --db "$DB"
compare sql.empty query sql "" --db "$DB"
compare sql.comment query sql "-- nothing" --db "$DB"
compare sql.parse query sql "SELEC 1" --db "$DB"
compare sql.attach query sql "ATTACH '$W/x.db' AS x" --db "$DB"
compare sql.nostdev query sql "SELECT hs_stdev(1)" --db "$DB"
compare q.norun query run 99 --db "$DB"
compare q.badid query run x --db "$DB"
compare q.nodb query runs --db "$W/missing.db"
compare q.compare.norun query compare 1 99 --db "$DB"
compare q.evals.norun query evals 99 --db "$DB"
compare q.empty.db query runs --db "$EDB"
compare q.empty.groups query groups --db "$EDB" --json

for id in 1 2 4 5 9 10; do compare "export.$id" export $id --csv out --db "$DB"; done
compare export.real export 1 --csv out --db "$VDB"
compare export.sim_of_real export 2 --csv out --db "$VDB"
compare export.norun export 99 --csv out --db "$DB"
compare export.nodb export 1 --csv out --db "$W/missing.db"

compare report.all report 1 2 3 4 5 6 7 8 9 10 --out r.html --db "$DB"
compare report.title report 2 3 --out r.html --db "$DB" --title "A <title>"
compare report.real report 1 2 --out r.html --db "$VDB"
compare report.norun report 99 --out r.html --db "$DB"
compare report.empty report 1 --out r.html --db "$EDB"

echo "$ncmd commands compared, $ndiff differ"

# ---- stored rows: the same commands storing runs with both binaries -----------------------
nstore=0 nsdiff=0
rows() { # DB: the run rows with what names the writing process blanked
  python3 - "$1" <<'EOF'
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for row in c.execute("SELECT id, kind, policy, params, cluster_name, cluster_text, model,"
                     " global_batch, seed, options, command FROM run ORDER BY id"):
    row = list(row)
    if row[9] is not None:
        o = json.loads(row[9])
        for k in ("pid", "host", "boot", "pid_start"):
            if k in o: o[k] = "X"
        row[9] = json.dumps(o)  # key order kept
    row[10] = None  # the command line names the binary
    print(repr(row))
for row in c.execute("SELECT run_id, sim_run_id FROM validation ORDER BY id"):
    print(repr(row))
EOF
}
store() { # NAME ARGS...: `hetsim sim ARGS` into a fresh database per binary
  local name=$1
  shift
  nstore=$((nstore + 1))
  for side in old new; do
    local bin=$OLD
    [ $side = new ] && bin=$NEW
    rm -f "$W/s-$side.db"*
    "$bin" sim --db "$W/s-$side.db" "$@" >/dev/null 2>"$W/s-$side.err"
    echo "rc=$?" >"$W/s-$side.rows"
    [ $side = old ] && [ "$(cat "$W/s-old.rows")" != rc=0 ] && echo "note: $name exits $(cat "$W/s-old.rows"): $(head -c 200 "$W/s-old.err")"
    rows "$W/s-$side.db" >>"$W/s-$side.rows" 2>&1
  done
  if ! cmp -s "$W/s-old.rows" "$W/s-new.rows"; then
    nsdiff=$((nsdiff + 1))
    echo "STORED DIFF $name: hetsim sim $*"
    diff "$W/s-old.rows" "$W/s-new.rows" | head -10
  fi
}
base=(--model resnet18 --global-batch 256)
for p in $("$OLD" policies 2>/dev/null | awk 'NF && $1 !~ /:$/ {print $1}' | grep -E '^[a-z][a-z0-9_-]*$'); do
  store "policy.$p" --cluster "$C4" "${base[@]}" --policy "$p" --iterations 3
done
store flags.epochs --cluster "$C4" "${base[@]}" --policy ssgd --epochs 0.01 --convergence analytic
store flags.target --cluster "$C4" "${base[@]}" --policy asp --target-loss 2.0 --convergence analytic --iterations 50
store flags.acc --cluster "$C4" --model mlp --global-batch 256 --policy ssgd --target-accuracy 0.5 --convergence analytic --iterations 50
store flags.proxy --cluster "$C4" --model mlp --global-batch 64 --policy ssgd --convergence proxy:eval_every=5,train_samples=512,eval_samples=128 --iterations 10
store flags.events --cluster "$C4" "${base[@]}" --policy ssgd --iterations 5 --events "$SRC/traces/lbb-4gpu-events.csv"
store flags.simtime --cluster "$C4" "${base[@]}" --policy ssgd --sim-time 1s
store flags.summary --cluster "$C4" "${base[@]}" --policy ssgd --iterations 3 --store summary --seed 42
store flags.params --cluster "$C4" "${base[@]}" --policy ssgd:algo=hier,bucket=1MiB,overlap=1 --iterations 3
store flags.lbcal --cluster "$C4" "${base[@]}" --policy lbcal:tau=2,overlap=1 --iterations 3
for t in "$SRC"/traces/*.yaml; do
  m=resnet18 b=256
  case $t in *sailor*) m=opt-350m b=8 ;; *1024gpu*) b=4096 ;; esac
  store "cluster.$(basename "$t")" --cluster "$t" --model $m --global-batch $b --policy ssgd --iterations 2
done

# validate: the same real run validated by both binaries (copies of one database).
nstore=$((nstore + 1))
for side in old new; do
  bin=$OLD
  [ $side = new ] && bin=$NEW
  cp "$VDB" "$W/val-$side.db"
  rm -f "$W/val-$side.db-wal" "$W/val-$side.db-shm"
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); [c.execute('DELETE FROM %s WHERE run_id > 1' % t) for t in ('step', 'eval', 'worker', 'summary')]; c.execute('DELETE FROM validation'); c.execute('DELETE FROM run WHERE id > 1'); c.commit()" "$W/val-$side.db"
  "$bin" validate 1 --db "$W/val-$side.db" >/dev/null 2>&1
  "$bin" validate 1 --db "$W/val-$side.db" --json >"$W/val-$side.json" 2>&1 # reused
  { rows "$W/val-$side.db"; grep -o '"reused": [a-z]*' "$W/val-$side.json"; } >"$W/val-$side.rows"
done
if ! cmp -s "$W/val-old.rows" "$W/val-new.rows"; then
  nsdiff=$((nsdiff + 1))
  echo "STORED DIFF validate"
  diff "$W/val-old.rows" "$W/val-new.rows" | head -10
fi
# The new binary reuses a validation the old one stored.
cp "$W/val-old.db" "$W/val-cross.db"
"$NEW" validate 1 --db "$W/val-cross.db" --json >"$W/val-cross.json" 2>&1
nstore=$((nstore + 1))
grep -q '"reused": true' "$W/val-cross.json" || { nsdiff=$((nsdiff + 1)); echo "STORED DIFF validate.reuse: the new binary did not reuse the old one's validation"; }
echo "$nstore stored-row comparisons, $nsdiff differ"
[ $ndiff = 0 ] && [ $nsdiff = 0 ]
