#!/usr/bin/env bash
# Three cpu workers on this 2-vCPU VM, validated on the default calibration (steps timed alone,
# the all-reduce over 2 threads) and on one of 3 (`calib --concurrent 3 --comm-world 3`),
# alternated pass by pass (docs/performance.md, "CPU sharing").
#   bash notebooks-data/cpu-sharing-2026-11-29/run.sh BUILD_DIR [PASSES] > OUT
set -eu
B=${1:?usage: run.sh BUILD_DIR [PASSES]}
D=$(dirname "$0")
for pass in $(seq 1 "${2:-3}"); do
  echo "## pass $pass: default calibration"
  CLUSTER=$D/cpu-3.yaml GLOBAL_BATCH=192 POLICIES="ssgd asp" bash bench/bench_validate.sh "$B" 1
  echo "## pass $pass: CONCURRENT=3 COMM_WORLD=3"
  CONCURRENT=3 COMM_WORLD=3 CLUSTER=$D/cpu-3.yaml GLOBAL_BATCH=192 POLICIES="ssgd asp" bash bench/bench_validate.sh "$B" 1
done
