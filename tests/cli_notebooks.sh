#!/usr/bin/env bash
# Executes the notebooks of notebooks-data/ against a database that notebooks-data/make_data.sh
# builds with this hetsim, so that they never rot: each must run without an error and draw its
# plots. The validation notebook runs twice: on the database as made (no validation rows while
# `hetsim validate` is not built) and on a copy given one validation row, so its plotting code
# runs too.
# Usage: bash tests/cli_notebooks.sh /path/to/hetsim /path/to/source-dir
# Exits 77 (skipped) when jupyter nbconvert, or pandas and matplotlib for its kernel, are
# missing (Debian: jupyter-nbconvert python3-ipykernel python3-pandas python3-matplotlib).
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=notebooks.

if ! command -v jupyter >/dev/null || ! jupyter nbconvert --version >/dev/null 2>&1; then
  echo "skip: jupyter nbconvert is not installed (Debian: jupyter-nbconvert python3-ipykernel)"
  exit 77
fi
# The kernel runs the python of jupyter's own kernel spec; ask it, not the PATH's python3.
KPY=$(head -1 "$(command -v jupyter)" | sed -n 's/^#! *//p' | awk '{print $1}')
[ -x "${KPY:-}" ] || KPY=python3
if ! "$KPY" -c "import pandas, matplotlib, ipykernel" 2>/dev/null; then
  echo "skip: $KPY lacks pandas, matplotlib or ipykernel (Debian: python3-pandas python3-matplotlib python3-ipykernel)"
  exit 77
fi

DB="$TMP/hetsim.db"
if ! bash "$SRC/notebooks-data/make_data.sh" "$HETSIM" "$DB" >"$TMP/make.log" 2>&1; then
  bad make_data "$(tail -c 400 "$TMP/make.log")"
  cli_finish
fi
ok make_data
have_calib=0
"$HETSIM" calib --help >/dev/null 2>&1 && have_calib=1

# execute NAME NOTEBOOK DB MIN_IMAGES: runs the notebook, then checks its outputs.
execute() {
  local name=$1 book=$2 db=$3 least=$4
  mkdir -p "$TMP/out-$name"
  if ! HETSIM_DB="$db" timeout 300 jupyter nbconvert --to notebook --execute \
    --ExecutePreprocessor.timeout=120 --output-dir "$TMP/out-$name" \
    "$SRC/notebooks-data/$book.ipynb" >"$TMP/nb-$name.log" 2>&1; then
    bad "$name" "nbconvert failed: $(grep -v '^0.00s' "$TMP/nb-$name.log" | tail -c 600)"
    return
  fi
  if "$KPY" - "$TMP/out-$name/$book.ipynb" "$least" <<'EOF'; then ok "$name"; else bad "$name" "outputs"; fi
import json, sys
book, least = json.load(open(sys.argv[1])), int(sys.argv[2])
images = errors = 0
for cell in book["cells"]:
    for out in cell.get("outputs", []):
        errors += out.get("output_type") == "error"
        images += "image/png" in out.get("data", {})
if errors or images < least:
    sys.exit("%d error outputs, %d plots (expected at least %d)" % (errors, images, least))
print("  %s: %d plots" % (sys.argv[1].rsplit("/", 1)[-1], images))
EOF
}

# policies: bars, progress, iteration times, and loss when the runs have eval rows.
want=3
[ "$("$HETSIM" query --db "$DB" sql "SELECT count(*) FROM eval" --csv | tail -1 | tr -d '\r')" != 0 ] && want=4
execute policies policies "$DB" $want
if [ $have_calib = 1 ]; then
  execute calibration calibration "$DB" 2
else
  execute calibration calibration "$DB" 0
fi
execute validation.empty validation "$DB" 0
cp "$DB" "$TMP/v.db"
if "$KPY" - "$TMP/v.db" <<'EOF'; then
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("INSERT INTO validation (run_id, sim_run_id, median_iter_error, p95_iter_error,"
          " time_to_loss_error, created_at) VALUES (1, 2, 0.05, 0.2, NULL, '2025-01-01T00:00:00.000Z')")
c.commit()
EOF
  execute validation.rows validation "$TMP/v.db" 2
else
  bad validation.rows "could not add a validation row"
fi

cli_finish
