#!/usr/bin/env bash
# Makes a hetsim build that can be carried to a GPU machine having the NVIDIA driver, CUDA, cuDNN
# and NCCL but none of our Debian libraries (docs/gpu.md):
#   - GSL, libyaml, SQLite, OpenBLAS (+ libgfortran, libquadmath) and zlib linked statically
#     (-DHETSIM_STATIC_DEPS=ON); the CUDA runtime is static in every CUDA build;
#   - the CUDA driver, cuBLAS, cuDNN and NCCL are opened at run time, so they come from the
#     target machine (the CUDA install, pip `nvidia-*` wheels, or HETSIM_*_PATH);
#   - any other shared library the binary still needs, except glibc's, is copied into lib/.
# Usage: tools/gpu-build.sh [BUILD_DIR]   (default build-gpu)
# Result: BUILD_DIR/hetsim-gpu-bundle/ and BUILD_DIR/hetsim-gpu-bundle.tar.gz
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build-gpu}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHETSIM_STATIC_DEPS=ON -DHETSIM_WITH_CUDA=ON \
  ${CMAKE_FLAGS:-}
cmake --build "$BUILD" --target hetsim -j "$JOBS"

OUT="$BUILD/hetsim-gpu-bundle"
rm -rf "$OUT"
mkdir -p "$OUT/lib"
cp "$BUILD/hetsim" "$OUT/hetsim"
cp "$SRC/tools/gpu-env.sh" "$OUT/gpu-env.sh"
cp "$SRC/docs/gpu.md" "$OUT/README-gpu.md"
cp -r "$SRC/traces" "$OUT/traces"

# Shared libraries still needed, except the C library's own (every Linux has a compatible one)
# and the NVIDIA ones (they must come from the target's driver and CUDA install).
ldd "$BUILD/hetsim" | awk '/=> \// {print $1, $3}' | while read -r name path; do
  case "$name" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*) ;;
    libcuda.so*|libcudnn*|libnccl*|libcublas*) ;;
    *) cp -L "$path" "$OUT/lib/$name"; echo "carried $name (from $path)" ;;
  esac
done
rmdir "$OUT/lib" 2>/dev/null || true

tar -C "$BUILD" -czf "$BUILD/hetsim-gpu-bundle.tar.gz" hetsim-gpu-bundle
echo "bundle: $OUT"
echo "archive: $BUILD/hetsim-gpu-bundle.tar.gz"
echo "shared libraries the binary needs:"
ldd "$OUT/hetsim" | sed 's/^/  /'
