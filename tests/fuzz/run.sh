#!/usr/bin/env bash
# Builds the libFuzzer harnesses against the project's sources with
# clang -fsanitize=fuzzer,address,undefined and runs each for a given time.
#
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]      (default 60 s, all targets)
#        tests/fuzz/run.sh --build-only [TARGET...]
# Targets: cluster_yaml events_csv idx query json import sim curves. Environment: FUZZ_BUILD (default /tmp/hetsim-fuzz),
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
[ ${#targets[@]} -gt 0 ] || targets=(cluster_yaml events_csv idx query json import sim curves)

CFLAGS=(-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined,float-cast-overflow
        -fno-sanitize-recover=undefined,float-cast-overflow
        -I"$SRC" -I"$OUT/generated" -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE)
sources() {
  case "$1" in
    cluster_yaml|events_csv) echo "core/core_config.c core/core_units.c core/core_error.c" ;;
    idx) echo "nn/nn_data.c core/core_rng.c core/core_error.c" ;;
    query) echo "cli/cmd_query.c core/core_store.c core/core_json.c core/core_units.c core/core_error.c" ;;
    json) echo "core/core_json.c core/core_error.c" ;;
    curves) echo "sim/sim_conv_curves.c core/core_hash.c core/core_error.c" ;;
    import) echo "calib/cal_import.c calib/cal_store.c calib/cal_fit.c calib/cal_device.c nn/nn_zoo.c nn/nn_graph.c core/core_store.c core/core_json.c core/core_perfmodel.c core/core_stats.c core/core_error.c" ;;
    sim) # the simulator with every policy, the convergence models, and what they link (no CUDA)
      echo "sim/sim_run.c sim/sim_event.c sim/sim_net.c sim/sim_trace.c sim/sim_conv.c sim/sim_conv_analytic.c sim/sim_proxy.c" \
           "runtime/rt_core.c runtime/rt_evals.c runtime/rt_model.c runtime/rt_runtime.c" \
           "$(cd "$SRC" && echo policies/*.c)" \
           "nn/nn_zoo.c nn/nn_graph.c nn/nn_net.c nn/nn_cpu.c nn/nn_blas.c nn/nn_data.c nn/nn_eval.c nn/nn_cuda.c" \
           "core/core_config.c core/core_units.c core/core_error.c core/core_rng.c core/core_stats.c" \
           "core/core_perfmodel.c core/core_progress.c core/core_affinity.c core/core_store.c" ;;
    *) echo "unknown target $1 (cluster_yaml events_csv idx query json import sim curves)" >&2; exit 2 ;;
  esac
}
libs() {
  case "$1" in
    cluster_yaml|events_csv) echo "-lyaml -lm" ;;
    idx) echo "-lgsl -lgslcblas -lz -lm" ;;
    query) echo "-lsqlite3 -lm" ;;
    json|curves) echo "-lm" ;;
    import) echo "-lsqlite3 -lgsl -lgslcblas -lopenblas -lm" ;;
    sim) echo "-lyaml -lsqlite3 -lgsl -lgslcblas -lopenblas -lz -lpthread -lm" ;;
  esac
}
seed() { # seed DIR TARGET: inputs that reach deep on the first run
  local dir=$1
  case "$2" in
    cluster_yaml) cp "$SRC"/traces/*.yaml "$dir"/ ;;
    events_csv) cp "$SRC"/traces/*.csv "$dir"/ ;;
    idx) for f in "$SRC"/tests/data/*-ubyte; do cp "$f" "$dir"/; done ;;
    json) cp "$SRC"/tests/data/profile-*.json "$dir"/ ;;
    curves) # the committed curves, each with every choice of the first byte (fuzz_curves.c)
      local f k
      for f in "$SRC"/notebooks-data/*/curves*.csv "$SRC"/notebooks-data/*/*/curves*.csv; do
        [ -e "$f" ] || continue
        for k in 0 1 2 3; do
          { printf "\\$(printf %03o "$k")"; cat "$f"; } > "$dir/$(echo "${f#"$SRC"/notebooks-data/}" | tr / -)-$k"
        done
      done ;;
    sim) # each cluster under several jobs (fuzz_sim.c: the first line)
      local f p
      for f in "$SRC"/traces/*.yaml "$SRC"/bench/clusters/*.yaml; do
        for p in "ssgd" "ssgd:overlap=1,algo=hier 96 6" "asp 32 12" "ssp:s=1 48 12 2" "ps-bsp 64 5" \
                 "localsgd:tau=2 48 10" "lbb 64 20 3" "lbcal 64 12 1 conv" "dbs:every=2 64 10" \
                 "predbatch:predictor=gru 64 10" "alloc-adaptive 64 10" "ashl:switch_iter=4 32 16 2 conv" \
                 "adsp:period=1s,min_interval=0s 32 10 1 conv" "ksync 64 8" "kasync 64 8" \
                 "lbb 128 10 1 resnet18" "ssgd:overlap=1,bucket=1MiB 64 6 1 cnn conv"; do
          { echo "$p"; cat "$f"; } > "$dir/$(basename "$f" .yaml)-$(echo "$p" | tr -c 'a-zA-Z0-9\n' -)"
        done
      done ;;
    import) # the test profiles and the converted ones of traces/profiles (named by folder)
      cp "$SRC"/tests/data/profile-*.json "$dir"/
      for f in "$SRC"/traces/profiles/*/*.json; do cp "$f" "$dir/$(basename "$(dirname "$f")")-$(basename "$f")"; done ;;
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
# core/core_buildinfo.h is made by CMake; the harnesses get one of a build without CUDA or MPI.
mkdir -p "$OUT/generated/core"
sed -e 's/@PROJECT_VERSION@/fuzz/' -e 's/@HETSIM_HAVE_[A-Z]*@/0/' -e 's/@HETSIM_SANITIZE_01@/1/' \
    -e "s|@CMAKE_SOURCE_DIR@|$SRC|" "$SRC/core/core_buildinfo.h.in" >"$OUT/generated/core/core_buildinfo.h"
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
