#!/usr/bin/env bash
# Real-mode throughput of two builds, alternated (issue 18: "real runs keep their throughput on
# the cpu backend"): `hetsim real` on worker threads, for each policy, REPS runs of each build
# in turn (A B A B ...), and the median samples/s of each with their ratio NEW / OLD.
# usage: bench/bench_real.sh NEW_HETSIM OLD_HETSIM [REPS] [POLICIES]
#   MODEL (cnn), WORKERS (2), BATCH (128), ITERS (40) change the run.
# The machine's load moves both builds alike only when they alternate: quote the ratio, and rerun
# on an idle machine before trusting a few percent.
set -u
NEW=${1:?usage: bench_real.sh NEW_HETSIM OLD_HETSIM [REPS] [POLICIES]}
OLD=${2:?usage: bench_real.sh NEW_HETSIM OLD_HETSIM [REPS] [POLICIES]}
REPS=${3:-5}
POLICIES=${4:-"ssgd asp localsgd"}
MODEL=${MODEL:-cnn} WORKERS=${WORKERS:-2} BATCH=${BATCH:-128} ITERS=${ITERS:-40}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
[ -e /usr/share/datasets/fashion-mnist ] || [ -n "${HETSIM_FASHION_MNIST_DIR:-}" ] || export HETSIM_FASHION_MNIST_DIR=synthetic

rate() { # BINARY POLICY: samples/s of one run
  "$1" real --backend cpu --model "$MODEL" --policy "$2" --global-batch "$BATCH" --iterations "$ITERS" \
    --workers "$WORKERS" --train-samples 4096 --eval-samples 200 --eval-every 1000 --db "$TMP/r.db" --json 2>/dev/null |
    sed -n 's/.*"samples_per_s": \([0-9.e+-]*\).*/\1/p'
  rm -f "$TMP"/r.db*
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-10s %14s %14s %8s\n' policy "old samples/s" "new samples/s" new/old
for p in $POLICIES; do
  : >"$TMP/old" && : >"$TMP/new"
  for _ in $(seq 1 "$REPS"); do
    rate "$OLD" "$p" >>"$TMP/old"
    rate "$NEW" "$p" >>"$TMP/new"
  done
  o=$(median <"$TMP/old") n=$(median <"$TMP/new")
  printf '%-10s %14.1f %14.1f %8.3f\n' "$p" "$o" "$n" "$(awk -v a="$n" -v b="$o" 'BEGIN { print a / b }')"
done
