#!/usr/bin/env bash
# Builds the hetsim.db that the notebooks in this folder read, by running hetsim: simulated
# runs of several policies on the bundled LBB 4-GPU cluster (with the analytic convergence
# model when this hetsim has it), a CPU calibration of mlp at a few batch sizes (when
# `hetsim calib` is built), and validations (when `hetsim real` and `hetsim validate` are
# built). It takes a few seconds.
#
# Usage: bash notebooks-data/make_data.sh [HETSIM] [DB]
#   HETSIM  the hetsim executable (default: build/hetsim of the source tree)
#   DB      the database to write (default: notebooks-data/hetsim.db); it is replaced
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(dirname "$HERE")
HETSIM=${1:-$SRC/build/hetsim}
DB=${2:-$HERE/hetsim.db}
[ -x "$HETSIM" ] || { echo "make_data.sh: no hetsim executable at $HETSIM (build it: make build)" >&2; exit 2; }
rm -f "$DB" "$DB-wal" "$DB-shm"

CLUSTER="$SRC/traces/lbb-4gpu.yaml"
conv=()
if "$HETSIM" sim --cluster "$CLUSTER" --model resnet18 --policy ssgd --global-batch 256 \
  --iterations 1 --convergence analytic --db "$DB.probe" >/dev/null 2>&1; then
  conv=(--convergence analytic)
fi
rm -f "$DB.probe" "$DB.probe-wal" "$DB.probe-shm"

# Policies compared in policies.ipynb: same cluster, model, global batch and number of global
# updates; the seed is fixed so the database is the same on every machine.
for policy in ssgd lbb ssp:s=2 asp localsgd:tau=4 dbs; do
  "$HETSIM" sim --cluster "$CLUSTER" --model resnet18 --policy "$policy" --global-batch 256 \
    --iterations 200 --seed 1 "${conv[@]}" --db "$DB" >/dev/null
done

# Calibration curves for calibration.ipynb: the CPU, small repetition counts to stay fast;
# all-reduce up to 1 MiB too, which `hetsim validate` needs for the real run below.
if "$HETSIM" calib --help >/dev/null 2>&1; then
  "$HETSIM" calib --device cpu --model mlp --batches 8,16,32,64,128 --comm-max 1MiB --warmup 1 \
    --min-reps 3 --max-reps 7 --db "$DB" >/dev/null
fi

# Validations for validation.ipynb: a short real run of mlp on the CPU backend (2 worker
# threads, a 2,000-sample shard of Fashion-MNIST) and its simulation with the calibration
# above. Skipped, with a warning, where `hetsim real` or `hetsim validate` is not built or
# cannot run (no Fashion-MNIST files): the notebook then says there are no validations.
if "$HETSIM" real --help >/dev/null 2>&1 && "$HETSIM" validate --help >/dev/null 2>&1; then
  if "$HETSIM" real --model mlp --policy ssgd --global-batch 64 --iterations 40 --backend cpu \
    --workers 2 --train-samples 2000 --eval-every 10 --eval-samples 500 --seed 1 --db "$DB" \
    --json >"$DB.real.json" 2>"$DB.real.err"; then
    real_id=$(tr -d ' \n' <"$DB.real.json" | sed -n 's/.*"run_id":\([0-9]*\).*/\1/p')
    "$HETSIM" validate "$real_id" --db "$DB" >/dev/null 2>>"$DB.real.err" ||
      echo "make_data.sh: warning: hetsim validate $real_id failed: $(tail -c 300 "$DB.real.err")" >&2
  else
    echo "make_data.sh: warning: no real run: $(tail -c 300 "$DB.real.err")" >&2
  fi
  rm -f "$DB.real.json" "$DB.real.err"
fi
echo "$DB"
