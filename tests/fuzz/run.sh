#!/usr/bin/env bash
# Builds the libFuzzer harnesses against the project's sources with
# clang -fsanitize=fuzzer,address,undefined and runs each for a given time.
#
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]      (default 60 s, all targets)
#        tests/fuzz/run.sh --build-only [TARGET...]
# Targets: cluster_yaml events_csv idx query json. Environment: FUZZ_BUILD (default /tmp/hetsim-fuzz),
# CC (default clang), FUZZ_JOBS (libFuzzer -jobs, default 1).
#
# Each target starts from its committed corpus tests/fuzz/corpus/TARGET/ plus seeds (the bundled
# traces, tests/data IDX files, query command lines) and works in FUZZ_BUILD/work/TARGET. At the
# end the new inputs are minimized into the committed corpus with -merge=1, and any crash input
# is copied to FUZZ_BUILD/crashes/TARGET/. Fix the crash, then add the input to
# tests/fuzz/regress/TARGET/ so tests/test_fuzz_regress.c replays it in the normal suite.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${FUZZ_BUILD:-/tmp/hetsim-fuzz}
CC=${CC:-clang}
build_only=0
secs=60
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then secs=$1; shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(cluster_yaml events_csv idx query json)

CFLAGS=(-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined,float-cast-overflow
        -fno-sanitize-recover=undefined,float-cast-overflow
        -I"$SRC" -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE)
sources() {
  case "$1" in
    cluster_yaml|events_csv) echo "core/core_config.c core/core_units.c core/core_error.c" ;;
    idx) echo "nn/nn_data.c core/core_rng.c core/core_error.c" ;;
    query) echo "cli/cmd_query.c core/core_store.c core/core_json.c core/core_units.c core/core_error.c" ;;
    json) echo "core/core_json.c core/core_error.c" ;;
    *) echo "unknown target $1 (cluster_yaml events_csv idx query json)" >&2; exit 2 ;;
  esac
}
libs() {
  case "$1" in
    cluster_yaml|events_csv) echo "-lyaml -lm" ;;
    idx) echo "-lgsl -lgslcblas -lz -lm" ;;
    query) echo "-lsqlite3 -lm" ;;
    json) echo "-lm" ;;
  esac
}
seed() { # seed DIR TARGET: inputs that reach deep on the first run
  local dir=$1
  case "$2" in
    cluster_yaml) cp "$SRC"/traces/*.yaml "$dir"/ ;;
    events_csv) cp "$SRC"/traces/*.csv "$dir"/ ;;
    idx) for f in "$SRC"/tests/data/*-ubyte; do cp "$f" "$dir"/; done ;;
    json) cp "$SRC"/tests/data/profile-*.json "$dir"/ ;;
    query)
      printf '\0%s\0%s' runs --json > "$dir/runs-json"
      printf '\0%s\0%s\0%s' run 1 --csv > "$dir/run-csv"
      printf '\0%s\0%s\0%s' compare 1 2 > "$dir/compare"
      printf '\001SELECT * FROM step JOIN worker USING (run_id)' > "$dir/sql-text"
      printf '\003SELECT json_extract(options, "$.iterations"), * FROM run' > "$dir/sql-csv"
      printf '\005SELECT * FROM eval' > "$dir/sql-json" ;;
  esac
}

mkdir -p "$OUT"
for t in "${targets[@]}"; do
  read -r -a src <<<"$(sources "$t")"
  read -r -a lib <<<"$(libs "$t")"
  (cd "$SRC" && "$CC" "${CFLAGS[@]}" "tests/fuzz/fuzz_$t.c" "${src[@]}" "${lib[@]}" -o "$OUT/fuzz_$t")
  echo "built $OUT/fuzz_$t"
  [ $build_only = 1 ] && continue
  corpus="$SRC/tests/fuzz/corpus/$t"
  work="$OUT/work/$t"
  crashes="$OUT/crashes/$t"
  mkdir -p "$corpus" "$work" "$crashes"
  seed "$work" "$t"
  cp -n "$corpus"/* "$work"/ 2>/dev/null || true
  rc=0
  par=()
  [ "${FUZZ_JOBS:-1}" -gt 1 ] && par=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS")
  # A dictionary of the format's words and of numeric extremes (tests/fuzz/TARGET.dict).
  [ -f "$SRC/tests/fuzz/$t.dict" ] && par+=(-dict="$SRC/tests/fuzz/$t.dict")
  # From $OUT: with -jobs, libFuzzer writes fuzz-N.log files into the current folder.
  (cd "$OUT" && "$OUT/fuzz_$t" -max_total_time="$secs" "${par[@]}" \
    -close_fd_mask=3 -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -artifact_prefix="$crashes/" "$work" >"$OUT/$t.log" 2>&1) || rc=$?
  tail -n 3 "$OUT/$t.log"
  # Minimize: keep only the inputs that add coverage, in the committed corpus.
  rm -rf "$corpus.new" && mkdir -p "$corpus.new"
  "$OUT/fuzz_$t" -merge=1 -close_fd_mask=3 "$corpus.new" "$corpus" "$work" >>"$OUT/$t.log" 2>&1 || true
  if [ -n "$(ls -A "$corpus.new")" ]; then rm -rf "$corpus" && mv "$corpus.new" "$corpus"; else rm -rf "$corpus.new"; fi
  echo "$t: exit $rc, corpus $(ls "$corpus" | wc -l) files, crashes: $(ls "$crashes" | wc -l) (log $OUT/$t.log)"
done
