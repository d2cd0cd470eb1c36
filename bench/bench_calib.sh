#!/usr/bin/env bash
# Held-out fit error of the cpu calibration, run after run (hetsim issue 3: <= 10% median on the
# cpu backend): RUNS times (default 5) `hetsim calib --device cpu --model mlp,cnn --batches
# BATCHES --no-comm` on a fresh database each, printing per run and model the chosen step form,
# its held-out (leave-one-out) median relative error and R2, with the run's wall time and the
# load average before it; then the worst and median error per model over the runs.
# Usage: bash bench/bench_calib.sh BUILD_DIR [RUNS] [BATCHES]   (docs/performance.md has results)
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${2:-5}
BATCHES=${3:-4,8,16,24,32,48,64,96}
BIN=$BUILD/hetsim
[ -x "$BIN" ] || { echo "bench_calib: no $BIN; build first" >&2; exit 2; }
command -v sqlite3 > /dev/null || { echo "bench_calib: needs the sqlite3 command" >&2; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hetsim-bench-calib.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
echo "command: hetsim calib --device cpu --model mlp,cnn --batches $BATCHES --no-comm --db FRESH.db"
echo "cores: $(nproc)"
printf '%-4s %-6s %-10s %9s %7s %8s  %s\n' run model form heldout R2 wall_s "load average (1, 5, 15 min) before"
for r in $(seq "$RUNS"); do
  db=$TMP/run$r.db
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s.%N)
  if ! "$BIN" calib --device cpu --model mlp,cnn --batches "$BATCHES" --no-comm --db "$db" > "$TMP/out$r.txt" 2>&1; then
    echo "run $r failed:" >&2
    cat "$TMP/out$r.txt" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  wall=$(echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}')
  sqlite3 -separator ' ' "$db" "SELECT model, form, heldout_rel_error, r2 FROM perf_model
      WHERE phase = 'step' AND chosen = 1 ORDER BY model DESC" |
    while read -r model form err r2; do
      printf '%-4s %-6s %-10s %8.1f%% %7.4f %8s  %s\n' "$r" "$model" "$form" \
        "$(awk -v e="$err" 'BEGIN { print e * 100 }')" "$r2" "$wall" "$load"
      echo "$model $err" >> "$TMP/errors.txt"
    done
done
echo
for model in mlp cnn; do
  grep "^$model " "$TMP/errors.txt" | sort -g -k2 | awk -v m="$model" '
    { e[NR] = $2 * 100 }
    END { if (NR == 0) exit
          med = NR % 2 ? e[(NR + 1) / 2] : (e[NR / 2] + e[NR / 2 + 1]) / 2
          n10 = 0; for (i = 1; i <= NR; i++) n10 += e[i] <= 10
          printf "%s: held-out error median %.1f%%, worst %.1f%%, <= 10%% in %d of %d runs\n", m, med, e[NR], n10, NR }'
done
