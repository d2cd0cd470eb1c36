#!/usr/bin/env bash
# Runs the test suite under valgrind memcheck (docs/reliability.md): every tests/test_*
# program, and every tests/cli_*.sh script with `hetsim` replaced by a wrapper that runs it
# under valgrind. Any memcheck error or definite/indirect leak fails the run.
# Usage: tests/valgrind.sh BUILD_DIR [NAME_REGEX]     (make valgrind builds and calls it)
# GPU tests (test_gpu_*, cli_gpu_*) are left out: valgrind cannot follow the CUDA driver.
# Slow (about 20-50x): not part of the CI run; run it before a release. The scripts see
# HETSIM_TEST_SLOW (default 20 here, 1 when unset elsewhere): the factor by which a script
# stretches its waits on hetsim (a timeout, the time before it interrupts a run).
set -u
BUILD=$(cd "${1:?usage: tests/valgrind.sh BUILD_DIR [NAME_REGEX]}" && pwd)
FILTER=${2:-.}
SRC=$(cd "$(dirname "$0")/.." && pwd)
command -v valgrind >/dev/null || { echo "valgrind not installed (apt-get install valgrind)"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hetsim-valgrind.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export HETSIM_TEST_SLOW=${HETSIM_TEST_SLOW:-20}
# OpenBLAS picks its kernels from the CPU model. Under valgrind its generic SSE3 (Prescott)
# kernels run about 8x faster than the AVX2 (Haswell) ones, whose FMA valgrind emulates slowly
# (test_proxy keep_local_allreduce: 5.2 s against 43 s, 2026-11-24); valgrind has no AVX-512.
# memcheck's findings do not depend on the kernel, so the tests ask for the fastest one here.
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Prescott}
VG=(valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --error-exitcode=1 --num-callers=30
    --suppressions="$SRC/tests/valgrind.supp")

# hetsim under valgrind, each process logging to its own file; the test programs the scripts
# look for beside hetsim (test_store's fixture, hetsim-mpi) are linked next to the wrapper.
mkdir -p "$TMP/bin" "$TMP/logs"
cat > "$TMP/bin/hetsim" <<WRAP
#!/bin/sh
exec ${VG[*]} --log-file=$TMP/logs/hetsim.%p.log "$BUILD/hetsim" "\$@"
WRAP
chmod +x "$TMP/bin/hetsim"
for f in "$BUILD"/test_* "$BUILD"/hetsim-mpi; do [ -x "$f" ] && ln -s "$f" "$TMP/bin/"; done

pass=0
fail=0
failed=()
for t in "$BUILD"/test_*; do
  name=$(basename "$t")
  [[ -x "$t" && ! "$name" =~ ^test_gpu_ && "$name" =~ $FILTER ]] || continue
  start=$SECONDS
  (cd "$SRC" && HETSIM_SOURCE_DIR="$SRC" "${VG[@]}" --log-file="$TMP/logs/$name.log" "$t" >"$TMP/$name.out" 2>&1)
  rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then
    pass=$((pass + 1)); echo "ok   $name ($((SECONDS - start)) s)"
  else
    fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (exit $rc)"; cat "$TMP/logs/$name.log"; tail -5 "$TMP/$name.out"
  fi
done
for s in "$SRC"/tests/cli_*.sh; do
  name=$(basename "$s" .sh)
  [[ ! "$name" =~ ^cli_gpu_ && "$name" =~ $FILTER ]] || continue
  start=$SECONDS
  rm -f "$TMP"/logs/hetsim.*.log
  (cd "$SRC" && bash "$s" "$TMP/bin/hetsim" "$SRC" >"$TMP/$name.out" 2>&1)
  rc=$?
  errs=$(cat "$TMP"/logs/hetsim.*.log 2>/dev/null)
  if { [ $rc -eq 0 ] || [ $rc -eq 77 ]; } && [ -z "$errs" ]; then
    pass=$((pass + 1)); echo "ok   $name ($((SECONDS - start)) s, $(ls "$TMP"/logs/hetsim.*.log 2>/dev/null | wc -l) hetsim processes)"
  else
    fail=$((fail + 1)); failed+=("$name")
    # each failed check with what its script printed after it (exit codes, the stderr it shows)
    echo "FAIL $name (exit $rc)"; grep -A8 '^FAIL' "$TMP/$name.out" | head -80; echo "$errs" | head -80
  fi
done
echo "valgrind: $pass passed, $fail failed ${failed[*]:-} ($SECONDS s, $(valgrind --version))"
[ $fail -eq 0 ]
