#!/usr/bin/env bash
# tools/gpu-device-run.sh: gpu-check.sh on a lent GPU machine, in one short command line
# (docs/gpu.md, "On the device machine"). It runs in the repository's copy there, with the bundle
# archive carried (`make gpu-bundle` here; carry build-gpu/hetsim-gpu-bundle.tar.xz):
#
#   bash tools/gpu-device-run.sh [gpu-check.sh options]      e.g. --budget 280, then --resume
#
# It unpacks the archive afresh into WORK/bundle (a bundle rebuilt between two calls is used),
# sources its gpu-env.sh, and runs its gpu-check.sh with the results in
# WORK/notebooks-data/gpu-<card>/, which stay between calls on the same machine, so that a second
# call with --resume goes on where the first stopped. With $OUT set (the device tool sets it), the
# results come back as OUT/gpu-check.tar.gz (written after every step) and OUT/summary.tsv.
# Environment: HETSIM_GPU_BUNDLE (the archive; default build-gpu/hetsim-gpu-bundle.tar.xz, else
# .tar.gz), HETSIM_GPU_WORK (WORK, default /tmp/hetsim-gpu-check).
# Exit status: gpu-check.sh's; 2 when the archive is missing or does not unpack.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${HETSIM_GPU_WORK:-/tmp/hetsim-gpu-check}
ARCHIVE=${HETSIM_GPU_BUNDLE:-}
if [ -z "$ARCHIVE" ]; then
  ARCHIVE=$REPO/build-gpu/hetsim-gpu-bundle.tar.xz
  [ -f "$ARCHIVE" ] || ARCHIVE=$REPO/build-gpu/hetsim-gpu-bundle.tar.gz
fi
[ -f "$ARCHIVE" ] || {
  echo "gpu-device-run.sh: no bundle archive at $ARCHIVE (make gpu-bundle, and carry it)" >&2
  exit 2
}

rm -rf "$WORK/bundle" && mkdir -p "$WORK/bundle" || exit 2
# tar needs xz for a .tar.xz; Python's tarfile reads both where tar cannot.
if ! tar -C "$WORK/bundle" -xf "$ARCHIVE" 2>"$WORK/untar.err"; then
  python3 -c 'import sys, tarfile
kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
tarfile.open(sys.argv[1]).extractall(sys.argv[2], **kw)' "$ARCHIVE" "$WORK/bundle" || {
    echo "gpu-device-run.sh: $ARCHIVE does not unpack: $(cat "$WORK/untar.err")" >&2
    exit 2
  }
fi
B=$WORK/bundle/hetsim-gpu-bundle
[ -f "$B/gpu-check.sh" ] || { echo "gpu-device-run.sh: $ARCHIVE holds no hetsim-gpu-bundle/gpu-check.sh" >&2; exit 2; }

cd "$B" || exit 2
echo "bundle: $(cat VERSION 2>/dev/null || echo "no VERSION (an old bundle)")"
. ./gpu-env.sh
pack=()
[ -n "${OUT:-}" ] && pack=(--pack "$OUT/gpu-check.tar.gz")
bash ./gpu-check.sh --root "$WORK" ${pack[@]+"${pack[@]}"} "$@"
rc=$?
if [ -n "${OUT:-}" ]; then
  cp -f "$WORK"/notebooks-data/gpu-*/summary.tsv "$OUT/summary.tsv" 2>/dev/null
fi
exit $rc
