#!/usr/bin/env bash
# Start-up at scale (issue 21, docs/performance.md): SSGD, 1 iteration, --store summary, on a
# cluster of WORKERS workers from bench/gen_cluster.sh, so the run is almost all start-up: the
# cluster file, the worker rows, the simulator's set-up. Runs each binary REPS times, alternated
# (old, new, old, new, ...), and prints per run the CPU seconds (user + sys, /usr/bin/time), the
# wall clock, the peak RSS and a hash of the JSON summary without its timing fields (the two
# builds must print the same one); then the medians. With CALLGRIND=1, also each binary's
# instruction count (valgrind --tool=callgrind, repeatable where times are not). ITERATIONS=K
# runs K iterations instead of 1 (issue 21's 1M workers x 100 iterations: ITERATIONS=100).
# Usage: bench/bench_startup.sh NEW_HETSIM [OLD_HETSIM] [WORKERS=1000000] [REPS=3]
set -eu
new=${1:?usage: bench_startup.sh NEW_HETSIM [OLD_HETSIM] [WORKERS] [REPS]}
old=${2:-}
n=${3:-1000000}
reps=${4:-3}
iters=${ITERATIONS:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bash "$HERE/gen_cluster.sh" "$n" >"$T/c.yaml"
bins=("$new")
[ -n "$old" ] && bins=("$old" "$new")
run() { # binary tag
  rm -f "$T/b.db"*
  /usr/bin/time -f "%U %S %e %M" -o "$T/time" "$1" sim --cluster "$T/c.yaml" --model resnet18 \
    --policy ssgd --global-batch $((n * 32)) --iterations "$iters" --store summary --db "$T/b.db" \
    --json >"$T/out.json"
  read -r us ss el rss <"$T/time"
  local h
  h=$(grep -v -e '"wall_s"' -e '"db"' "$T/out.json" | md5sum | cut -c1-12)
  echo "$2 cpu_s $(awk -v a="$us" -v b="$ss" 'BEGIN {printf "%.2f", a + b}') user_s $us sys_s $ss wall_s $el peak_rss_mib $((rss / 1024)) json $h" \
    | tee -a "$T/log"
}
echo "== $n workers x $iters iteration(s), $reps alternated runs (load average $(cut -d' ' -f1-3 /proc/loadavg))"
for ((r = 1; r <= reps; r++)); do
  [ -n "$old" ] && run "$old" old
  run "$new" new
done
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for tag in old new; do
  grep -q "^$tag " "$T/log" || continue
  echo "$tag median: cpu_s $(awk -v t=$tag '$1 == t {print $3}' "$T/log" | median)" \
    "wall_s $(awk -v t=$tag '$1 == t {print $9}' "$T/log" | median)" \
    "peak_rss_mib $(awk -v t=$tag '$1 == t {print $11}' "$T/log" | median)"
done
if [ "${CALLGRIND:-0}" = 1 ]; then
  for b in "${bins[@]}"; do
    rm -f "$T/b.db"*
    valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" "$b" sim --cluster "$T/c.yaml" \
      --model resnet18 --policy ssgd --global-batch $((n * 32)) --iterations "$iters" --store summary \
      --db "$T/b.db" >/dev/null 2>"$T/cg.err"
    echo "$b: $(grep -o 'Collected : [0-9]*' "$T/cg.err" | cut -d' ' -f3) instructions"
    callgrind_annotate --inclusive=yes "$T/cg.out" 2>/dev/null |
      grep -E ':(hs_cluster_parse|hs_store_workers_add|hs_sim_run) ' | sed 's/^/    /'
  done
fi
