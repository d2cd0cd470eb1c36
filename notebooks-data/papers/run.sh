#!/usr/bin/env bash
# Reproduces the four comparisons of hetsim issue 4 ("Reproducing the papers' comparisons")
# with the bundled scenarios and writes results.csv and results.md (our figure beside the
# published one, per row). Every setting is written down in README.md and docs/papers.md.
#
# Usage: run.sh HETSIM_BINARY [OUTDIR] [--quick]
#   OUTDIR   where results.csv, results.md and commands.txt go (default: this folder)
#   --quick  tiny iteration counts and a small proxy data set: checks that the script works
#            and writes every row, in seconds; its numbers mean nothing
set -euo pipefail

usage() { echo "usage: run.sh HETSIM_BINARY [OUTDIR] [--quick]" >&2; exit 2; }
[ $# -ge 1 ] || usage
H=$1
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
OUT=$HERE
QUICK=0
for a in "$@"; do
  case $a in
    --quick) QUICK=1 ;;
    -*) usage ;;
    *) OUT=$a ;;
  esac
done
[ -x "$H" ] || { echo "run.sh: $H is not an executable" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
DB=$W/papers.db
export HETSIM_PROGRESS=0

LBB4=$SRC/traces/lbb-4gpu.yaml
LBB1G=$HERE/lbb-4gpu-1gbps.yaml
ASHL3=$SRC/traces/ashl-3worker.yaml
RING=$HERE/alloc-ring.yaml
RING_SLOW=$HERE/alloc-ring-slowdown.csv

# Stop conditions. Full: the settings of docs/papers.md. Quick: a few updates of everything.
if [ "$QUICK" = 1 ]; then
  EPOCH=(--iterations 3)                 # stands in for one CIFAR-10 epoch
  EPOCH3=(--iterations 3)                # stands in for three
  PROXY="proxy:eval_every=2,eval_samples=200,train_samples=2048"
  PROXY_TTA=(--iterations 4)             # cap on the time-to-accuracy runs
  PROXY_2EP=(--iterations 4)             # stands in for two Fashion-MNIST epochs
  ANALYTIC_CAP=(--iterations 20)
  PROXY_EACH="proxy:eval_every=1,eval_samples=200,train_samples=2048"
  PROXY_CAP=(--iterations 4)
else
  EPOCH=(--epochs 1)                     # CIFAR-10: 50,000 samples
  EPOCH3=(--epochs 3)
  PROXY="proxy:eval_every=10"
  PROXY_TTA=(--epochs 10)                # a cap; the target ends the run first
  PROXY_2EP=(--epochs 2)                 # Fashion-MNIST: 60,000 samples per epoch
  ANALYTIC_CAP=(--sim-time 100000s)      # a cap; the target ends the run first
  PROXY_EACH="proxy:eval_every=1"        # evaluated at every update: no time rounded up
  PROXY_CAP=(--sim-time 1500s)           # a cap; the target ends the run first
fi

echo "# each command also had --db <a temporary database> --json; paths are relative to the source tree" >"$W/commands.txt"
# run NAME hetsim-sim-arguments...: one simulated run, its JSON summary in $W/NAME.json
run() {
  local name=$1
  shift
  echo "$name: hetsim sim $*" >>"$W/commands.txt"
  if ! "$H" sim "$@" --db "$DB" --json >"$W/$name.json" 2>"$W/$name.err"; then
    echo "run.sh: run $name failed:" >&2
    cat "$W/$name.err" >&2
    exit 1
  fi
  echo "run.sh: $name done" >&2
}
# batches NAME: the batch of each worker in the run's first iteration, "b0 b1 ..."
batches() {
  local id
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$W/$1.json")
  "$H" query --db "$DB" sql "SELECT batch FROM step WHERE run_id = $id AND step = 0 ORDER BY worker" --csv |
    tr -d '\r' | tail -n +2 | tr '\n' ' ' >"$W/$1.batches"
}

# 1. SSGD vs LBB on the LBB 4-GPU server, ResNet-18, global batch 512 (LBB's setting).
for p in ssgd lbb; do
  run "c1_epoch_$p" --cluster "$LBB4" --model resnet18 --policy $p --global-batch 512 "${EPOCH[@]}" --store steps
  batches "c1_epoch_$p"
done
for p in ssgd lbb; do
  run "c1_tta_$p" --cluster "$LBB4" --model mlp --policy $p --global-batch 512 --convergence "$PROXY" \
    --target-accuracy 0.80 "${PROXY_TTA[@]}" --store summary
done

# 2. LBB vs LBCAL under constrained bandwidth (1 Gbps between the four GPUs).
for p in lbb lbcal; do
  run "c2_epoch_$p" --cluster "$LBB1G" --model resnet18 --policy $p --global-batch 512 "${EPOCH[@]}" --store summary
done
for p in ssgd lbb lbcal; do
  run "c2_acc_$p" --cluster "$LBB1G" --model mlp --policy $p --global-batch 512 --convergence "$PROXY" \
    "${PROXY_2EP[@]}" --store summary
done

# 3. ADSP vs ASHL on the 3-worker slowed cluster: time to the same loss (analytic model).
for m in "mlp 0.45" "resnet18 0.5"; do
  set -- $m
  for p in ps-bsp adsp ashl; do
    run "c3_${1}_$p" --cluster "$ASHL3" --model "$1" --policy $p --global-batch 192 --convergence analytic \
      --target-loss "$2" "${ANALYTIC_CAP[@]}" --store summary
  done
done
# 3b. The same for mlp under the proxy (real SGD on Fashion-MNIST on each worker's schedule).
for p in ps-bsp adsp ashl; do
  run "c3p_mlp_$p" --cluster "$ASHL3" --model mlp --policy $p --global-batch 192 --convergence "$PROXY_EACH" \
    --target-loss 0.45 "${PROXY_CAP[@]}" --store summary
done

# 4. Proportional (alloc-static) vs self-adaptive (alloc-adaptive) allocation on a ring with a
#    worker replaced and a worker added; then the same with a slowdown nominal speeds miss.
for p in alloc-static alloc-adaptive; do
  run "c4_members_$p" --cluster "$RING" --model resnet18 --policy $p --global-batch 512 "${EPOCH3[@]}" --store summary
  run "c4_slow_$p" --cluster "$RING" --events "$RING_SLOW" --model resnet18 --policy $p --global-batch 512 \
    "${EPOCH3[@]}" --store summary
done

if [ "$QUICK" = 1 ]; then MODE=quick; else MODE=full; fi
python3 "$HERE/tables.py" "$W" "$OUT" "$MODE" "$("$H" --version 2>/dev/null || echo hetsim)"
sed "s|$SRC/||g" "$W/commands.txt" >"$OUT/commands.txt"
echo "run.sh: wrote $OUT/results.csv, $OUT/results.md and $OUT/commands.txt" >&2
