#!/usr/bin/env bash
# Makes a hetsim build that can be carried to a GPU machine having the NVIDIA driver, CUDA, cuDNN
# and NCCL but none of our Debian libraries (docs/gpu.md):
#   - GSL, libyaml, SQLite, OpenBLAS (+ libgfortran, libquadmath) and zlib linked statically
#     (-DHETSIM_STATIC_DEPS=ON); the CUDA runtime is static in every CUDA build;
#   - the CUDA driver, cuBLAS, cuDNN and NCCL are opened at run time, so they come from the
#     target machine (the CUDA install, pip `nvidia-*` wheels, or HETSIM_*_PATH);
#   - any other shared library the programs still need, except glibc's, is copied into lib/;
#   - with them, everything tools/gpu-check.sh runs there: the gpu and deviceless test programs
#     and scripts, bench_gpu_nn and bench/torch_resnet18.py, tools/hetsim_profile.py where the
#     tree has it, and gpu-check.sh itself at the bundle's root.
# Usage: tools/gpu-build.sh [BUILD_DIR] [--no-build] [--out DIR] [--no-tar]
#   BUILD_DIR   default build-gpu
#   --no-build  assemble the bundle from BUILD_DIR as it is (tests/deviceless_gpu_check.sh does
#               this with the test build, to check what a bundle holds)
#   --out DIR   the bundle folder (default BUILD_DIR/hetsim-gpu-bundle)
#   --no-tar    no archives beside it
# Result: the bundle folder and, unless --no-tar, BUILD_DIR/hetsim-gpu-bundle.tar.gz and, where xz
# is installed, BUILD_DIR/hetsim-gpu-bundle.tar.xz: about 5 MB against the .tar.gz's 37 MB,
# because xz's 64 MiB window finds the static libraries that every program of the bundle repeats
# (the device tool carries at most 64 MiB, the repository included: docs/gpu.md)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-gpu OUT="" BUILD_IT=1 TAR=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD_IT=0 ;;
    --no-tar) TAR=0 ;;
    --out) OUT=$2; shift ;;
    -*) echo "gpu-build.sh: unknown option $1" >&2; exit 2 ;;
    *) BUILD=$1 ;;
  esac
  shift
done
OUT=${OUT:-$BUILD/hetsim-gpu-bundle}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# The programs the bundle carries (tests/ and bench/ ones go to the same folders in the bundle).
PROGRAMS=(test_gpu_probe test_gpu_nn test_gpu_real test_gpu_partitions test_deviceless_cudnn test_deviceless_driver
          bench_gpu_nn)

if [ "$BUILD_IT" = 1 ]; then
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHETSIM_STATIC_DEPS=ON -DHETSIM_WITH_CUDA=ON \
    ${CMAKE_FLAGS:-}
  cmake --build "$BUILD" --target hetsim "${PROGRAMS[@]}" -j "$JOBS"
fi

rm -rf "$OUT"
mkdir -p "$OUT/lib" "$OUT/tests/data" "$OUT/bench" "$OUT/tools"
cp "$BUILD/hetsim" "$OUT/hetsim"
for p in "${PROGRAMS[@]}"; do
  case "$p" in bench_*) dest=bench ;; *) dest=tests ;; esac
  cp "$BUILD/$p" "$OUT/$dest/$p"
done
cp "$SRC"/tests/cli_gpu_*.sh "$SRC/tests/cli-lib.sh" "$OUT/tests/"
cp "$SRC"/tests/data/cudnn-*.json "$OUT/tests/data/"
cp "$SRC/bench/torch_resnet18.py" "$OUT/bench/"
[ -f "$SRC/tools/hetsim_profile.py" ] && cp "$SRC/tools/hetsim_profile.py" "$OUT/tools/"
cp "$SRC/tools/gpu-check.sh" "$OUT/gpu-check.sh"
cp "$SRC/tools/gpu-env.sh" "$OUT/gpu-env.sh"
cp "$SRC/docs/gpu.md" "$OUT/README-gpu.md"
cp -r "$SRC/traces" "$OUT/traces"
# What the bundle was built from, for env.txt and the dry run (a stale bundle runs old code).
git -C "$SRC" describe --always --dirty >"$OUT/VERSION" 2>/dev/null || echo unknown >"$OUT/VERSION"

# Shared libraries still needed, except the C library's own (every Linux has a compatible one)
# and the NVIDIA ones (they must come from the target's driver and CUDA install).
for bin in "$OUT/hetsim" "$OUT"/tests/test_* "$OUT"/bench/bench_*; do
  ldd "$bin" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  case "$name" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*) ;;
    libcuda.so*|libcudnn*|libnccl*|libcublas*) ;;
    *) [ -e "$OUT/lib/$name" ] || { cp -L "$path" "$OUT/lib/$name"; echo "carried $name (from $path)"; } ;;
  esac
done
rmdir "$OUT/lib" 2>/dev/null || true

echo "bundle: $OUT"
if [ "$TAR" = 1 ]; then
  tar -C "$(dirname "$OUT")" -czf "$BUILD/hetsim-gpu-bundle.tar.gz" "$(basename "$OUT")"
  echo "archive: $BUILD/hetsim-gpu-bundle.tar.gz"
  if command -v xz >/dev/null; then
    tar -C "$(dirname "$OUT")" -cf - "$(basename "$OUT")" | xz -9 >"$BUILD/hetsim-gpu-bundle.tar.xz"
    echo "archive: $BUILD/hetsim-gpu-bundle.tar.xz"
  fi
fi
echo "shared libraries hetsim needs:"
ldd "$OUT/hetsim" | sed 's/^/  /'
