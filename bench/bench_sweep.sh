#!/usr/bin/env bash
# Scaling of `hetsim sweep` from 1 to 2 local workers and from 1 to 2 MPI ranks: the wall time
# of one 8-point grid (hetero-1024gpu, ssgd/localsgd/ssp x 2 seeds, 2,000 iterations, summaries
# only), each configuration on a fresh database, best of REPEATS (default 3).
# Usage: bash bench/bench_sweep.sh [BUILD_DIR] [REPEATS]   (docs/performance.md has results)
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
REPEATS=${2:-3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/hetsim-bench-sweep.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/grid.yaml" <<YAML
name: bench
clusters: [$SRC/traces/hetero-1024gpu.yaml]
policies: [ssgd, {name: localsgd, params: {tau: [2, 8]}}, ssp]
seeds: [1, 2]
model: resnet18
global_batch: 8192
iterations: 2000
YAML
best() { # best LABEL CMD...: prints the best wall time of REPEATS runs
  local label=$1 b=""
  shift
  for _ in $(seq "$REPEATS"); do
    rm -f "$TMP"/s.db*
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    b=$(echo "$t0 $t1 $b" | awk '{t = $2 - $1; if ($3 == "" || t < $3) print t; else print $3}')
  done
  printf '%-28s %8.3f s\n' "$label" "$b"
}
nproc_=$(nproc)
echo "8 points, best of $REPEATS, $nproc_ CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
best "local --jobs 1" "$BUILD/hetsim" sweep --grid "$TMP/grid.yaml" --db "$TMP/s.db" --jobs 1
best "local --jobs 2" "$BUILD/hetsim" sweep --grid "$TMP/grid.yaml" --db "$TMP/s.db" --jobs 2
if command -v mpirun >/dev/null && [ -x "$BUILD/hetsim-mpi" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  best "mpirun -np 1 hetsim-mpi" mpirun -np 1 "$BUILD/hetsim-mpi" sweep --grid "$TMP/grid.yaml" --db "$TMP/s.db"
  best "mpirun -np 2 hetsim-mpi" mpirun -np 2 "$BUILD/hetsim-mpi" sweep --grid "$TMP/grid.yaml" --db "$TMP/s.db"
fi
