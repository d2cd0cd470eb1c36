#!/usr/bin/env bash
# Remakes the screenshots in this folder: the runs of issue 20's report page, the report, and
# headless Chromium at 1400 px wide (as tests/cli_report.sh renders it), cut into 1400x1400
# pieces and stored with a 256-colour palette (no dithering) to keep them small.
# usage: make.sh HETSIM [OUT_DIR]   (needs chromium and python3 with Pillow; the real run and
# its validation need Fashion-MNIST, /usr/share/datasets/fashion-mnist, else they are left out)
set -eu
H=$(realpath "$1")
OUT=$(realpath "${2:-$(dirname "$0")}")
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
DB="$T/r.db"
for p in lbb ssgd predbatch dbs asp; do
  "$H" sim --cluster "$SRC/traces/lbb-4gpu.yaml" --model resnet18 --policy $p --global-batch 256 \
    --iterations 2000 --store steps --convergence analytic --db "$DB" >/dev/null
done
runs="1 2 3 4 5"
if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  (cd "$T" && "$H" calib --device cpu --model mlp --batches 8,16,32,48 --db "$DB" --max-reps 6 \
    --min-reps 3 --warmup 1 --comm-max 256KiB >/dev/null &&
    "$H" real --policy ssgd --model mlp --global-batch 32 --iterations 300 --workers 2 \
      --train-samples 3000 --eval-samples 300 --eval-every 10 --db "$DB" --calib "$DB" >/dev/null &&
    "$H" validate 6 --db "$DB" >/dev/null) && runs="$runs 6 7"
fi
# shellcheck disable=SC2086
"$H" report $runs --db "$DB" --out "$T/report.html"
HOME="$T" timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$T/chrome" --force-device-scale-factor=1 --window-size=1400,12000 \
  --screenshot="$T/page.png" "file://$T/report.html" >/dev/null 2>&1
PY=python3
command -v /usr/bin/python3 >/dev/null && PY=/usr/bin/python3
"$PY" - "$T/page.png" "$OUT" <<'EOF'
import sys
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
w, h = im.size
px = im.load()
end = max(y for y in range(0, h, 2) if any(px[x, y] != (255, 255, 255) for x in range(0, w, 3)))
n = 0
for y0 in range(0, end + 1, 1400):
    part = im.crop((0, y0, w, min(end + 8, y0 + 1400)))
    part.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save("%s/page-%d.png" % (sys.argv[2], n), optimize=True)
    n += 1
print("%d pieces of a %dx%d page" % (n, w, end + 8))
EOF
