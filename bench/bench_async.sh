#!/usr/bin/env bash
# Cost per event of the asynchronous parameter-server policies (asp, ssp, ashl, ksync, kasync;
# ssgd for reference) as the cluster grows: instructions counted by callgrind, which repeat
# from run to run on a loaded machine where CPU seconds do not. Each policy runs twice on the
# same cluster with a different number of updates; the difference of the two instruction
# counts over the difference of their events is the cost of one event in the steady state,
# start-up (the cluster file, the database) cancelling out. O(log N) per event shows as a
# figure that barely moves from 1,024 to 10,000 workers; a scan of the workers per event as
# one that grows about 10x. docs/performance.md has the figures.
#
# Clusters: bench/gen_ps_cluster.sh N 0.05 (a server link of 100Gbps shared by every push and
# pull, workers on 25Gbps, compute jitter cv 0.05 so that ssp's bound binds now and then).
# Usage: bench/bench_async.sh [HETSIM] [SIZES] [POLICIES]
#   e.g. bench/bench_async.sh build/hetsim "1024 10000"
#        bench/bench_async.sh build/hetsim 1024 "ssp:s=1 ksync:k=1"
# Needs valgrind. Each run is a `hetsim sim ... --store summary` under callgrind; the 10,000-
# worker runs take one to a few minutes each under it.
set -eu
H=${1:-build/hetsim}
SIZES=${2:-1024 10000}
POLICIES=${3:-ssgd asp ssp:s=1 ashl ksync ksync:k=1 kasync}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v valgrind >/dev/null || { echo "bench_async.sh: needs valgrind" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# ir_events HETSIM ARGS...: prints "INSTRUCTIONS EVENTS" of one run.
ir_events() {
  rm -f "$T/b.db"* "$T/cg.out"
  valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" "$@" --store summary --db "$T/b.db" \
    --json >"$T/out.json" 2>"$T/err" || { cat "$T/err" >&2; exit 1; }
  local ir ev
  ir=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$T/cg.out" | head -1)
  ev=$(sed -n 's/.*"events": *\([0-9]*\).*/\1/p' "$T/out.json")
  echo "$ir $ev"
}

printf '%-34s %7s %12s %10s %14s %10s\n' policy workers updates events instructions "per event"
for n in $SIZES; do
  bash "$HERE/gen_ps_cluster.sh" "$n" 0.05 >"$T/c.yaml"
  for spec in $POLICIES; do
    pol=${spec%%:*}
    # Two update counts past the start: ssgd's and ksync's updates move every worker (O(N)
    # events each), the others' one worker. ashl profiles (2 pushes per worker with
    # profile=1) and switches to SHL at 2N updates: the window is SHL's. ashl runs the small
    # mlp model: with resnet18's 44 MB on a server link shared by 10,000 workers, profiling
    # measures seconds of queueing and the plan gives thousands of local steps per push.
    model=resnet18
    case $pol in
      ssgd | ksync | kasync) u1=10 u2=20 ;;
      ashl) u1=$((3 * n)) u2=$((4 * n)) model=mlp; extra=${spec#ashl}; extra=${extra#:}
            spec="ashl:profile=1,switch_iter=$((2 * n))${extra:+,$extra}" ;;
      *) u1=$((2 * n)) u2=$((4 * n)) ;;
    esac
    run=("$H" sim --cluster "$T/c.yaml" --model "$model" --policy "$spec" --global-batch $((32 * n)))
    read -r ir1 ev1 < <(ir_events "${run[@]}" --iterations "$u1")
    read -r ir2 ev2 < <(ir_events "${run[@]}" --iterations "$u2")
    printf '%-34s %7s %12s %10s %14s %10s\n' "$spec" "$n" "$u1..$u2" "$((ev2 - ev1))" \
      "$((ir2 - ir1))" "$(awk -v a="$((ir2 - ir1))" -v b="$((ev2 - ev1))" 'BEGIN { printf "%.0f", a / b }')"
  done
done
