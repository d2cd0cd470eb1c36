#!/usr/bin/env bash
# tools/gpu-check.sh rehearsed on the emulated GPU (label deviceless). A bundle assembled from
# this build by tools/gpu-build.sh --no-build gets hetsim_emu (hetsim on the emulated CUDA
# runtime, driver, cuDNN, cuBLAS and NCCL 2.30 of tests/gpu_emu) as its hetsim, the GPU test
# programs built deviceless as its test_gpu_*, and the emulation's nvidia-smi on PATH. It runs
# the steps that need no PyTorch on a GPU: doctor (with cuDNN's device-properties JSON),
# deviceless, ctest-gpu (test_gpu_probe, test_gpu_real, cli_gpu_real.sh and cli_gpu_ranks.sh;
# test_gpu_partitions and strict math's test_gpu_nn are left out, run by their own deviceless
# tests; ctest-gpu runs last, once test_gpu_nn has served the agreement step),
# calib-whole, calib-partitions, local (three partitions of different sizes, validate of each
# run, sim on the partitions' calibrations), agreement (cpu against cuda under fast math) and
# nccl (two ranks on one GPU). Every step must end ok and leave its files. The model is mlp
# (--models mlp): the emulation computes on the CPU; the GPU run uses resnet18. Then, with the
# local step, every policy on the local backend's partitions; last, the partition requests only
# a GPU can refuse (exit 2, nothing stored). What this cannot check: the real libraries and
# hardware (their numerics, speed, the SMs a partition really gets); see docs/gpu.md.
# Usage: bash tests/deviceless_gpu_check_emu.sh SOURCE_DIR BUILD_DIR [STEP...]
# STEPs: those to run and check (default all of the above; the sanitizer build gives the quick
# ones, where calibrating and training under ASan would take minutes).
set -u
SRC=${1:?usage: deviceless_gpu_check_emu.sh SOURCE_DIR BUILD_DIR [STEP...]}
BUILD=${2:?usage: deviceless_gpu_check_emu.sh SOURCE_DIR BUILD_DIR [STEP...]}
shift 2
. "$SRC/tests/cli-lib.sh"
cli_setup "$BUILD/hetsim" "$SRC"
CHECK_PREFIX=gpu_check_emu.

for p in hetsim hetsim_emu test_deviceless_gpu_nn test_deviceless_gpu_probe test_deviceless_gpu_real \
  test_deviceless_cudnn test_gpu_nn bench_gpu_nn; do
  [ -x "$BUILD/$p" ] || { echo "$BUILD/$p is not built (a build without CUDA or the emulation?): skipped"; exit 77; }
done
for t in timeout python3; do
  command -v "$t" >/dev/null || { echo "$t is needed: skipped"; exit 77; }
done

B="$TMP/bundle"
if bash "$SRC/tools/gpu-build.sh" "$BUILD" --no-build --out "$B" --no-tar >"$TMP/build.out" 2>&1; then
  ok assemble
else
  bad assemble "$(tail -3 "$TMP/build.out")"
fi
cp -f "$BUILD/hetsim_emu" "$B/hetsim"
rm -f "$B"/tests/test_gpu_*
for t in nn probe real; do cp -f "$BUILD/test_deviceless_gpu_$t" "$B/tests/test_gpu_$t"; done
mkdir -p "$TMP/bin" && cp "$SRC/tests/gpu_emu/nvidia-smi" "$TMP/bin/" && export PATH="$TMP/bin:$PATH"

# The emulated GPU: its driver where the loader looks, its cuDNN, cuBLAS and NCCL where hetsim's
# loader looks first; NCCL 2.30, which lets two ranks share a GPU when asked.
export LD_LIBRARY_PATH="$BUILD/gpu-emu-driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HETSIM_CUDNN_PATH="$BUILD/gpu-emu" HETSIM_CUBLAS_PATH="$BUILD/gpu-emu" HETSIM_NCCL_PATH="$BUILD/gpu-emu"
export HS_EMU_NCCL_VERSION=23007 NCCL_MULTI_RANK_GPU_ENABLE=1

STEPS=(doctor deviceless ctest-gpu calib-whole calib-partitions local agreement nccl)
[ $# -gt 0 ] && STEPS=("$@")
ran() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
args=()
for s in "${STEPS[@]}"; do [ "$s" = ctest-gpu ] || args+=(--step "$s"); done
R="$TMP/res"
rc=0
if [ ${#args[@]} -gt 0 ]; then
  # HS_EMU_STEP_LIMIT (CMake sets it under ASan): every step's limit, in place of a GPU's.
  bash "$B/gpu-check.sh" --models mlp "${args[@]}" ${HS_EMU_STEP_LIMIT:+--step-limit "$HS_EMU_STEP_LIMIT"} \
    --out "$R" --budget 1200 >"$TMP/run" 2>&1
  rc=$?
fi
# ctest-gpu without test_gpu_nn: test_deviceless_gpu_nn runs the same program under strict math.
if ran ctest-gpu; then
  rm -f "$B/tests/test_gpu_nn"
  bash "$B/gpu-check.sh" --models mlp --step ctest-gpu --out "$R" --budget 300 >>"$TMP/run" 2>&1
  r=$?
  [ "$rc" = 0 ] && rc=$r
fi
check run_exit_0 test "$rc" = 0 || { cat "$TMP/run"; tail -n 5 "$R"/logs/*.log; }
S="$R/summary.tsv"
for s in "${STEPS[@]}"; do
  check "${s}_ok" test "$(awk -F'\t' -v s="$s" '$1 == s {print $2}' "$S")" = ok || tail -n 5 "$R/logs/$s.log"
done

# doctor: the GPU, and cuDNN's device properties as the deviceless step reads them.
if ran doctor; then
  check doctor_sms python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["gpus"][0]["sms"] == 132' \
    "$R/doctor.json"
  check deviceprop_json python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["multiProcessorCount"] == 132' \
    "$R/cudnn-deviceprop.json"
fi

# ctest-gpu: two programs and two scripts, every one passed (none skipped).
if ran ctest-gpu; then
  check ctest_gpu_all_passed grep -q '^tests passed: 4, failed: 0' "$R/ctest-gpu.txt"
fi

# calib-whole and calib-partitions: mlp on the whole GPU and on 16, 32 and 64 SMs (1/8, 1/4 and
# 1/2 of 132, in multiples of 8), each with a chosen step fit; the CSV exports.
if ran calib-whole && ran calib-partitions; then
  DB="$R/calib.db"
  check calib_devices test "$(rows "$DB" "SELECT name FROM device ORDER BY name" | tr '\n' '|')" = \
    "gpu_emu device 0|gpu_emu device 0 (16 SMs)|gpu_emu device 0 (32 SMs)|gpu_emu device 0 (64 SMs)|"
  check calib_fits test "$(val "$DB" "SELECT count(*) FROM perf_model WHERE model = 'mlp' AND phase = 'step' AND chosen = 1")" = 4
  for f in calib-device.csv calib-calib_sample.csv calib-perf_model.csv calib-sm16.json calib-sm32.json calib-sm64.json; do
    check "file_$f" test -s "$R/$f"
  done
fi

# local: four runs (ssgd, localsgd and lbb on the three partitions; ssgd on three equal ones),
# complete, each worker on the partition its type names, each validated; the simulator on the
# partitions' calibrations.
if ran local; then
  L="$R/local.db"
  check local_runs test "$(val "$L" "SELECT count(*) FROM run WHERE kind = 'real' AND status = 'complete'")" = 4
  check local_type_devices grep -q 'cuda:0/sm=64' "$R/local-type-devices.csv"
  check local_lbb_batches test "$(tail -n +2 "$R/local-parts-lbb-batches.csv" | wc -l)" = 3
  n_valid=0
  for f in "$R"/local-validate-*.json; do
    python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["comm_backend"] == "local"' "$f" &&
      n_valid=$((n_valid + 1))
  done
  check local_validated test "$n_valid" = 4
  check local_validate_types python3 -c 'import json, sys
t = json.load(open(sys.argv[1]))["type_calibrations"]
assert t["large"] == "gpu_emu device 0 (64 SMs)", t' "$R/local-validate-1.json"
  check local_sim python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["status"] == "complete"' \
    "$R/local-parts-sim-ssgd.json"
fi

# agreement: test_gpu_nn under fast math, every case passed.
if ran agreement; then
  check agreement_cases grep -q ' passed, 0 failed' "$R/agreement-fast.txt"
fi

# nccl: rank 0 completes one run of two workers and stores it; rank 1 prints nothing (both ended
# with status 0: the step is ok above); then a run of three ranks whose third worker joins, and
# steps. Then the same step under NCCL 2.28: one rank.
if ran nccl; then
  check nccl_rank0_complete python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["status"] == "complete"' \
    "$R/nccl-rank0.json"
  check nccl_rank1_quiet test ! -s "$R/nccl-rank1.json"
  check nccl_run_stored test "$(val "$R/nccl.db" "SELECT s.workers || ' ' || r.status || ' ' || json_extract(r.options, '$.backend') FROM run r
    JOIN summary s ON s.run_id = r.id WHERE r.kind = 'real' AND r.cluster_name <> 'nccl-join'")" = "2 complete nccl"
  check nccl_join_stored test "$(val "$R/nccl.db" "SELECT s.workers || ' ' || r.status || ' ' || (SELECT steps > 0 FROM worker
    WHERE run_id = r.id AND idx = 2) FROM run r JOIN summary s ON s.run_id = r.id WHERE r.cluster_name = 'nccl-join'")" = "3 complete 1"
  # Under NCCL 2.28, as on the lent machine (its PyTorch's wheel), doctor's two-rank probe says
  # missing and the step runs one rank instead of skipping: ok, one worker stored.
  R1="$TMP/res-nccl228"
  HS_EMU_NCCL_VERSION=22803 NCCL_MULTI_RANK_GPU_ENABLE= bash "$B/gpu-check.sh" --models mlp --step doctor --step nccl \
    --out "$R1" --budget 300 >"$TMP/run-nccl228" 2>&1
  check nccl228_one_rank_ok test "$(awk -F'\t' '$1 == "nccl" {print $2}' "$R1/summary.tsv")" = ok ||
    { tail -n 5 "$TMP/run-nccl228"; tail -n 5 "$R1/logs/nccl.log"; }
  check nccl228_says grep -q "NCCL does not allow two ranks on one GPU here (doctor: missing; NCCL 2.30+ needed): one rank" \
    "$R1/logs/nccl.log"
  check nccl228_run_stored test "$(val "$R1/nccl.db" "SELECT s.workers || ' ' || r.status || ' ' || json_extract(r.options, '$.backend') FROM run r
    JOIN summary s ON s.run_id = r.id WHERE r.kind = 'real'")" = "1 complete nccl"
fi

# Every policy on the local backend (its all-reduce, send/recv and parameter server on device
# memory), three workers on partitions of 16 SMs: each run completes and every worker steps. With
# the local step, which the sanitizer build leaves out (minutes under ASan).
if ran local; then
  P="$TMP/policies.db"
  for p in $("$HETSIM" policies | awk '/^[a-z]/ {print $1}'); do
    spec=$p
    # adsp's defaults commit once a minute (tests/cli_real.sh).
    [ "$p" = adsp ] && spec="adsp:period=0.1s,commits=20,min_interval=0.002s"
    expect_exit "local_policy_$p" 0 timeout 120 "$B/hetsim" real --backend local --device cuda:0/sm=16 --workers 3 \
      --policy "$spec" --model mlp --iterations 8 --global-batch 48 --train-samples 480 --eval-samples 60 \
      --eval-every 4 --db "$P" --json
    id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$TMP/out")
    check "local_policy_${p}_complete" test -n "$id" -a "$(val "$P" "SELECT status FROM run WHERE id = ${id:-0}")" = complete
    check "local_policy_${p}_workers" test "$(val "$P" "SELECT count(*) FROM worker WHERE run_id = ${id:-0} AND steps > 0")" = 3
  done
fi

# Bad input that only the GPU can judge, refused with exit 2 before anything is stored (the
# emulated GPU: 132 SMs, 128 of them in whole groups of 8).
E="$B/hetsim"
q_args=(--backend local --policy ssgd --model mlp --iterations 3 --global-batch 48 --train-samples 300
        --eval-samples 60)
expect_exit bad_partitions_together 2 "$E" real "${q_args[@]}" --device cuda:0/sm=64 --workers 3 --db "$TMP/bad.db"
check bad_partitions_says_why grep -q 'need 256 SMs together.*more than the 128 in whole groups of GPU 0' "$TMP/err"
check bad_partitions_nothing_stored test ! -e "$TMP/bad.db"
expect_exit bad_partition_size 2 "$E" real "${q_args[@]}" --device cuda:0/sm=200 --workers 1 --db "$TMP/bad.db"
check bad_partition_size_says_why grep -q 'the GPU has 132 SMs, fewer than the partition' "$TMP/err"
cat >"$TMP/big.yaml" <<'EOF2'
name: too-big
network: {bandwidth: 100GB/s, latency: 5us}
device_types:
  half: {compute: {t0: 1ms, per_sample: 1ms}, real_device: "cuda:0/sm=64"}
nodes:
  - name: gpu0
    devices: [{type: half}, {type: half}, {type: half}]
EOF2
expect_exit bad_cluster_partitions 2 "$E" real "${q_args[@]}" --cluster "$TMP/big.yaml" --db "$TMP/bad.db"
check bad_cluster_names_file grep -q "big.yaml: the partitions of the workers need 192 SMs together" "$TMP/err"
check bad_cluster_nothing_stored test ! -e "$TMP/bad.db"

cli_finish
