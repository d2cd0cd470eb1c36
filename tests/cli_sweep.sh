#!/usr/bin/env bash
# CLI tests for `hetsim sweep`: grid errors, the point list and keys, local workers, shards
# merged without duplicates, resume (no finished point runs again), merging by hand, step rows
# copied exactly, points without a complete run named and failing the sweep, and, when Open
# MPI's mpirun is installed, ranks with `hetsim` (launcher environment) and with `hetsim-mpi`
# (MPI_COMM_WORLD) when it was built. The ranks create one database at once, which once lost
# a rank ("not a hetsim one": core_store's schema check read two snapshots).
# Usage: bash tests/cli_sweep.sh /path/to/hetsim /path/to/source-dir
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=sweep.
RUN_ERR_BYTES=400

cp "$SRC/traces/lbb-4gpu.yaml" "$TMP/c4.yaml"
# The same cluster with a slower card: a different point for every policy and seed.
sed 's/per_sample: 3.1ms/per_sample: 4.2ms/' "$SRC/traces/lbb-4gpu.yaml" > "$TMP/c4slow.yaml"
cat > "$TMP/grid.yaml" <<'YAML'
name: t
clusters: [c4.yaml, c4slow.yaml]
policies:
  - ssgd
  - {name: ssp, params: {s: [1, 3]}}
seeds: [1, 2]
model: resnet18
global_batch: 128
iterations: 15
YAML
N=12

# --- usage and grid errors ---------------------------------------------------------------
run help 0 sweep --help && check help.text has out "--grid FILE"
run no_grid 2 sweep && check no_grid.msg has err "--grid FILE is required"
run missing_grid 2 sweep --grid "$TMP/nope.yaml" && check missing_grid.msg has err "nope.yaml"
printf 'clusters: [c4.yaml]\npolicies: [ssgd]\nmodel: resnet18\nglobal_batch: 64\niterations: 5\nbogus: 1\n' > "$TMP/g1.yaml"
run unknown_key 2 sweep --grid "$TMP/g1.yaml" && check unknown_key.msg has err "g1.yaml:6:1: grid: expected one of"
printf 'clusters: [c4.yaml]\npolicies: [{name: ssp, params: {s: [1, -2]}}]\nmodel: resnet18\nglobal_batch: 64\niterations: 5\n' > "$TMP/g2.yaml"
run bad_param 2 sweep --grid "$TMP/g2.yaml" && check bad_param.msg has err "g2.yaml:2:12: policies[0]: ssp: parameter s"
printf 'clusters: [c4.yaml, none.yaml]\npolicies: [ssgd]\nmodel: resnet18\nglobal_batch: 64\niterations: 5\n' > "$TMP/g3.yaml"
run bad_cluster 2 sweep --grid "$TMP/g3.yaml" && check bad_cluster.msg has err "g3.yaml:1:21: clusters[1]"
printf 'clusters: [c4.yaml]\npolicies: [ssgd]\nmodel: resnet18\nglobal_batch: 64\n' > "$TMP/g4.yaml"
run no_stop 2 sweep --grid "$TMP/g4.yaml" && check no_stop.msg has err "a stop condition"
printf 'clusters: [c4.yaml]\npolicies: [ssgd, "ssgd:overlap=0"]\nmodel: resnet18\nglobal_batch: 64\niterations: 5\n' > "$TMP/g5.yaml"
run same_point 2 sweep --grid "$TMP/g5.yaml" && check same_point.msg has err "are the same experiment"
check nothing_written test ! -e hetsim.db -a ! -e "$TMP/hetsim.db"

# --- the point list ---------------------------------------------------------------------
DB="$TMP/s.db"
run list 0 sweep --grid "$TMP/grid.yaml" --db "$DB" --list &&
  check list.count test "$(grep -c ' todo ' "$TMP/out")" -eq $N
check list.no_db test ! -e "$DB"
check list.keys_unique test "$(awk 'NR>1 {print $2}' "$TMP/out" | sort -u | wc -l)" -eq $N
# The key is the experiment, not its spelling or the file's place.
mkdir -p "$TMP/sub" && cp "$TMP/c4.yaml" "$TMP/sub/other.yaml"
printf 'clusters: [sub/other.yaml]\npolicies: ["ssgd:overlap=0,algo=ring"]\nseeds: 1\nmodel: resnet18\nglobal_batch: 128\niterations: 15\n' > "$TMP/g6.yaml"
k1=$(awk 'NR==2 {print $2}' "$TMP/out")
run list_respelled 0 sweep --grid "$TMP/g6.yaml" --list &&
  check key_stable test "$(awk 'NR==2 {print $2}' "$TMP/out")" = "$k1"

# --- local workers, merge, resume ---------------------------------------------------------
run sweep 0 sweep --grid "$TMP/grid.yaml" --db "$DB" --jobs 2 &&
  check sweep.summary has out "sweep t: $N of $N points complete"
check sweep.runs test "$(rows "$DB" "SELECT count(*) FROM run WHERE status = 'complete'")" -eq $N
check sweep.keys test "$(rows "$DB" "SELECT count(DISTINCT json_extract(options, '\$.sweep_point')) FROM run")" -eq $N
check sweep.summaries test "$(rows "$DB" "SELECT count(*) FROM summary")" -eq $N
check sweep.workers test "$(rows "$DB" "SELECT count(*) FROM worker")" -eq $((N * 4))
check sweep.no_shards test -z "$(ls "$TMP" | grep -E 's\.db\.(w|lock)')"
check sweep.shards_used test "$(grep -c 's.db.w1' "$TMP/out")" -eq $((N / 2))
# Slower card, longer simulated time: the clusters really differ.
check sweep.clusters_differ test "$(rows "$DB" "SELECT count(DISTINCT s.sim_time_s) FROM summary s JOIN run r ON r.id = s.run_id WHERE r.policy = 'ssgd'")" -eq 2
run again 0 sweep --grid "$TMP/grid.yaml" --db "$DB" --jobs 2 &&
  check again.nothing_run has out "$N already done, 0 to run"
check again.no_new_runs test "$(rows "$DB" "SELECT count(*) FROM run")" -eq $N
run list_done 0 sweep --grid "$TMP/grid.yaml" --db "$DB" --list &&
  check list_done.count test "$(grep -c ' done ' "$TMP/out")" -eq $N

# Grown grid: only the new points run.
sed 's/seeds: \[1, 2\]/seeds: [1, 2, 3]/' "$TMP/grid.yaml" > "$TMP/grid3.yaml"
run grown 0 sweep --grid "$TMP/grid3.yaml" --db "$DB" --jobs 2 &&
  check grown.only_new has out "$N already done, $((N / 2)) to run"
check grown.runs test "$(rows "$DB" "SELECT count(*) FROM run")" -eq $((N * 3 / 2))

# Shards left behind (as a killed sweep leaves them, or --no-merge on another node) count as
# done and are merged by the next sweep.
D2="$TMP/r.db"
run no_merge 0 sweep --grid "$TMP/grid.yaml" --db "$D2" --jobs 2 --no-merge
check no_merge.main_empty test "$(rows "$D2" "SELECT count(*) FROM run")" -eq 0
check no_merge.shards test -e "$D2.w0" -a -e "$D2.w1"
run resume 0 sweep --grid "$TMP/grid.yaml" --db "$D2" --jobs 1 &&
  check resume.nothing_run has out "$N already done, 0 to run"
check resume.merged test "$(rows "$D2" "SELECT count(*) FROM run")" -eq $N
check resume.shards_gone test ! -e "$D2.w0" -a ! -e "$D2.w1"

# --merge by hand, twice: no duplicates.
D3="$TMP/m.db"
run no_merge2 0 sweep --grid "$TMP/grid.yaml" --db "$TMP/node.db" --jobs 2 --no-merge
run merge 0 sweep --merge "$TMP/node.db.w0" "$TMP/node.db.w1" --db "$D3" --keep &&
  check merge.msg has out "merged $N runs from 2 shards"
run merge_twice 0 sweep --merge "$TMP/node.db.w0" "$TMP/node.db.w1" --db "$D3" &&
  check merge_twice.msg has out "merged 0 runs from 2 shards into $D3 ($N already there)"
check merge.no_dup test "$(rows "$D3" "SELECT count(*) FROM run")" -eq $N
check merge.removed test ! -e "$TMP/node.db.w0"
run merge_missing 1 sweep --merge "$TMP/none.db" --db "$D3"
run merge_usage 2 sweep --merge --db "$D3"
check merge.fk test -z "$(rows "$D3" "PRAGMA foreign_key_check")"
# A shard at schema version 1 (an older hetsim's, whose run tables are today's) merges; one
# from a newer hetsim is refused with both versions named.
run no_merge_v1 0 sweep --grid "$TMP/grid.yaml" --db "$TMP/old.db" --jobs 1 --no-merge
sqlite3 "$TMP/old.db.w0" "UPDATE schema_version SET version = 1"
run merge_v1 0 sweep --merge "$TMP/old.db.w0" --db "$TMP/v1.db" &&
  check merge_v1.msg has out "merged $N runs from 1 shard"
run no_merge_new 0 sweep --grid "$TMP/grid.yaml" --db "$TMP/new.db" --jobs 1 --no-merge
sqlite3 "$TMP/new.db.w0" "UPDATE schema_version SET version = 99"
run merge_newer 1 sweep --merge "$TMP/new.db.w0" --db "$TMP/v1.db" &&
  check merge_newer.msg has err "has schema version 99"

# Step rows are copied exactly, with remapped run ids.
printf 'clusters: [c4.yaml]\npolicies: [lbb]\nseeds: [5]\nmodel: resnet18\nglobal_batch: 128\niterations: 12\nstore: steps\n' > "$TMP/gs.yaml"
run steps 0 sweep --grid "$TMP/gs.yaml" --db "$D3" --jobs 1
run steps_direct 0 sim --cluster "$TMP/c4.yaml" --policy lbb --seed 5 --model resnet18 --global-batch 128 --iterations 12 --db "$TMP/direct.db"
sig="SELECT count(*) || ':' || printf('%.9f', sum(start_s + compute_end_s + wait_s + coalesce(comm_end_s, 0))) || ':' || sum(batch * (step + 1) * (worker + 1)) FROM step WHERE run_id = (SELECT max(id) FROM run)"
a=$(rows "$D3" "$sig"); b=$(rows "$TMP/direct.db" "$sig")
check steps.same_rows test -n "$a" -a "$a" = "$b"
check steps.remapped test "$(rows "$D3" "SELECT count(*) FROM step WHERE run_id NOT IN (SELECT id FROM run)")" -eq 0

# A point runs as `hetsim sim --db DB` would, though it writes to a shard: a grid without
# `calib:` reads DB's calibrations and imported models (a model outside the zoo here).
"$HETSIM" calib import "$SRC/tests/data/profile-tinynet.json" --db "$TMP/cal.db" >/dev/null
printf 'name: t1\nnetwork: {bandwidth: 10Gbps, latency: 20us}\ndevice_types:\n  t1: {memory: 16GiB, compute: {calib: "Test GPU T1"}}\nnodes:\n  - name: n0\n    devices: [{type: t1}, {type: t1}]\n' > "$TMP/t1.yaml"
printf 'clusters: [t1.yaml]\npolicies: [ssgd]\nmodel: tinynet\nglobal_batch: 32\niterations: 5\n' > "$TMP/gcal.yaml"
run calib_from_db 0 sweep --grid "$TMP/gcal.yaml" --db "$TMP/cal.db" --jobs 1 &&
  check calib_from_db.complete test "$(rows "$TMP/cal.db" "SELECT count(*) FROM run WHERE model = 'tinynet' AND status = 'complete'")" -eq 1

# Points that end without a complete run fail the sweep by name (here every run stops at the
# event limit), rather than leaving a shorter table behind.
printf 'clusters: [c4.yaml]\npolicies: [ssgd]\nseeds: [1, 2]\nmodel: resnet18\nglobal_batch: 128\niterations: 15\nmax_events: 2\n' > "$TMP/gfail.yaml"
run failing 1 sweep --grid "$TMP/gfail.yaml" --db "$TMP/f.db" --jobs 1 &&
  check failing.named bash -c "grep -q '2 of 2 points have no complete run in $TMP/f.db: point 0 (.*), point 1 (' '$TMP/err'"
check failing.summary has out "0 of 2 points complete"

# A second sweep on the same shards is refused while one holds the lock.
# This shell holds the lock (on fd 9) until it closes the file.
if command -v flock >/dev/null; then
  exec 9>"$DB.lock"
  flock -n 9
  run locked 1 sweep --grid "$TMP/grid.yaml" --db "$DB" --jobs 1 && check locked.msg has err "another sweep"
  check locked.lock_kept test -e "$DB.lock"
  exec 9>&-
  run unlocked 0 sweep --grid "$TMP/grid.yaml" --db "$DB" --jobs 1
fi

# --- list settings: model, global_batch and convergence as lists ---------------------------
printf 'clusters: [c4.yaml]\npolicies: [ssgd, {name: ssp, params: {s: [1, 3]}}]\nmodel: [resnet18, mlp]\nglobal_batch: [128, 256]\niterations: 6\n' > "$TMP/glist.yaml"
run list_grid 0 sweep --grid "$TMP/glist.yaml" --db "$TMP/l.db" --list &&
  check list_grid.count test "$(grep -c ' todo ' "$TMP/out")" -eq 12
check list_grid.shows_values has out "model=mlp global_batch=256"
# A point of a list has the key of the grid that gives its value alone (here: the first grid).
printf 'clusters: [c4.yaml]\npolicies: [{name: ssp, params: {s: [1, 3]}}]\nseeds: [1, 2]\nmodel: [mlp, resnet18]\nglobal_batch: [128]\niterations: 15\n' > "$TMP/glist2.yaml"
run list_keys 0 sweep --grid "$TMP/glist2.yaml" --db "$DB" --list &&
  check list_keys.same_as_scalar test "$(grep -c ' done ' "$TMP/out")" -eq 4
run list_sweep 0 sweep --grid "$TMP/glist.yaml" --db "$TMP/l.db" --jobs 2 &&
  check list_sweep.all has out "12 of 12 points complete"
check list_sweep.combos test "$(rows "$TMP/l.db" "SELECT count(DISTINCT model || '/' || global_batch) FROM run")" -eq 4
printf 'clusters: [c4.yaml]\npolicies: [ssgd]\nmodel: mlp\nglobal_batch: [128, 128]\niterations: 6\n' > "$TMP/gl3.yaml"
run list_twice 2 sweep --grid "$TMP/gl3.yaml" --list && check list_twice.msg has err "gl3.yaml:4:21: global_batch[1]: expected each value once"
printf 'clusters: [c4.yaml]\npolicies: [ssgd]\nmodel: mlp\nglobal_batch: 128\niterations: [6, 7]\n' > "$TMP/gl4.yaml"
run list_refused 2 sweep --grid "$TMP/gl4.yaml" --list && check list_refused.msg has err "iterations: expected one value (only model, global_batch and convergence take lists)"

# The grid example of docs/cli.md parses as written (its paths taken from a docs/ folder).
mkdir -p "$TMP/dx/docs" "$TMP/dx/traces"
cp "$SRC/traces/"*.yaml "$TMP/dx/traces/"
awk '/^name: policies-on-16/,/^```/' "$SRC/docs/cli.md" | grep -v '^```' > "$TMP/dx/docs/grid.yaml"
run docs_grid 0 sweep --grid "$TMP/dx/docs/grid.yaml" --list --db "$TMP/dx.db" &&
  check docs_grid.points test "$(grep -c ' todo ' "$TMP/out")" -eq $((2 * 2 * 9 * 3))

# --- MPI ----------------------------------------------------------------------------------
if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  for bin in "$HETSIM" "$(dirname "$HETSIM")/hetsim-mpi"; do
    [ -x "$bin" ] || continue
    name=mpi_$(basename "$bin" | tr - _)
    M="$TMP/$name.db"
    # Open MPI's own allocations outlive MPI_Finalize: in a sanitizer build, LeakSanitizer would
    # report them (from libmpi and its unloaded plugins) for hetsim-mpi. hetsim's own code is
    # leak-checked by the plain `hetsim` runs above.
    asan=${ASAN_OPTIONS:-}
    [ "$bin" != "$HETSIM" ] && export ASAN_OPTIONS="${asan:+$asan:}detect_leaks=0"
    mpirun -np 2 "$bin" sweep --grid "$TMP/grid.yaml" --db "$M" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    check "$name.exit" test $rc -eq 0
    [ $rc -eq 0 ] || { echo "stderr of the ranks:"; head -c 2000 "$TMP/err"; }
    check "$name.runs" test "$(rows "$M" "SELECT count(*) FROM run")" -eq $N
    check "$name.keys" test "$(rows "$M" "SELECT count(DISTINCT json_extract(options, '\$.sweep_point')) FROM run")" -eq $N
    check "$name.both_ranks" test "$(grep -c 'rank 1)' "$TMP/out")" -eq $((N / 2))
    check "$name.no_shards" test -z "$(ls "$TMP" | grep -F "$name.db.rank")"
    mpirun -np 2 "$bin" sweep --grid "$TMP/grid.yaml" --db "$M" >"$TMP/out" 2>&1
    check "$name.resume" test "$(grep -c '0 to run' "$TMP/out")" -eq 2
    # Failing points: the job fails, and the points are named (by rank 0 for the whole grid
    # in hetsim-mpi, by each rank for its own in hetsim; there, once one rank exits non-zero,
    # mpirun may end the other before it prints, so one rank's line is all that is certain).
    mpirun -np 2 "$bin" sweep --grid "$TMP/gfail.yaml" --db "$TMP/$name.f.db" >"$TMP/out" 2>"$TMP/err"
    check "$name.failing_exit" test $? -ne 0
    if [ "$bin" = "$HETSIM" ]; then
      check "$name.failing_named" test "$(grep -c '1 of 1 points of this rank have no complete run' "$TMP/err")" -ge 1
    else
      check "$name.failing_named" grep -q '2 of 2 points have no complete run in .*: point 0 (.*), point 1 (' "$TMP/err"
    fi
    export ASAN_OPTIONS="$asan"
  done
else
  echo "skip sweep.mpi: no mpirun (apt-get install openmpi-bin)"
fi

cli_finish
