#!/usr/bin/env bash
# hetsim real with per-worker devices from the cluster file (device_types.T.real_device), the
# checks that need no GPU: the key is parsed and leaves `hetsim sim` unchanged; every refusal
# (the cpu backend with GPU devices, the nccl backend, workers on several GPUs under the local
# backend, cpu workers under it, a malformed device) exits 2 with FILE:LINE:COL and stores
# nothing; a cpu-backend run whose types say `real_device: cpu` records them in its options;
# and, where there is no GPU, a local run on three partitions fails cleanly (exit 2, the
# backend's no-GPU message) and stores nothing. The runs on a GPU are tools/gpu-check.sh's
# `local` step.
# usage: cli_real_devices.sh HETSIM_BINARY SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
H=$HETSIM T=$TMP
cd "$T"

# Three partitions of GPU 0, of three sizes, written three ways (quoted in a flow mapping, plain
# in a flow mapping, plain in a block mapping).
cat >parts.yaml <<'EOF'
name: one-gpu-parts
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  big: {compute: {t0: 1ms, per_sample: 0.1ms}, real_device: "cuda:0/sm=64"}
  mid: {compute: {t0: 1ms, per_sample: 0.2ms}, real_device: cuda:0/sm=32}
  small:
    compute: {t0: 1ms, per_sample: 0.4ms}
    real_device: cuda:0/sm=16
nodes:
  - name: gpu0
    devices: [{type: big}, {type: mid}, {type: small}]
EOF
# The same cluster without the key.
grep -v '^    real_device' parts.yaml | sed 's/, real_device: [^}]*}/}/' >plain.yaml
check plain_has_no_key bash -c "! grep -q real_device plain.yaml"

# `hetsim sim`: the key changes nothing (the same summary, bit for bit, but the run id).
sim=(sim --policy ssgd --model mlp --global-batch 48 --iterations 20 --seed 3 --json)
expect_exit sim_parts 0 "$H" "${sim[@]}" --cluster parts.yaml --db "$T/sim.db"
sed -e 's/"run_id": [0-9]*//' -e 's/"wall_s": [^,}]*//' -e 's/"cluster_path": [^,}]*//' "$T/out" >sim-parts.json
expect_exit sim_plain 0 "$H" "${sim[@]}" --cluster plain.yaml --db "$T/sim.db"
sed -e 's/"run_id": [0-9]*//' -e 's/"wall_s": [^,}]*//' -e 's/"cluster_path": [^,}]*//' "$T/out" >sim-plain.json
check sim_unchanged_by_real_device cmp -s sim-parts.json sim-plain.json

real=(real --policy ssgd --model mlp --global-batch 48 --iterations 4 --train-samples 96 --eval-samples 32)
runs_before=$(val "$T/sim.db" "SELECT count(*) FROM run")
check sim_db_has_runs test "$runs_before" = 2

# refuse NAME PATTERN ARGS...: exit 2, the message matches PATTERN, and nothing was stored in
# the existing database sim.db nor a new one created.
refuse() {
  local name=$1 pattern=$2
  shift 2
  rm -f "$T/new.db"
  expect_exit "$name" 2 "$H" "${real[@]}" "$@"
  check "$name.message" grep -qE -- "$pattern" "$T/err" || cat "$T/err"
  check "$name.nothing_stored" test "$(val "$T/sim.db" "SELECT count(*) FROM run")" = "$runs_before" -a ! -e "$T/new.db"
}

# The cpu backend (the default) runs every worker on the cpu.
refuse cpu_backend_gpu_devices '^hetsim real: parts\.yaml:4:61: device_types\.big\.real_device "cuda:0/sm=64": the cpu backend runs every worker on the cpu; workers on a GPU need --backend local$' \
  --cluster parts.yaml --db "$T/sim.db"
refuse cpu_backend_explicit 'parts\.yaml:4:61: .*the cpu backend' --cluster parts.yaml --backend cpu --db "$T/new.db"
# nccl: each rank is on --device.
refuse nccl_backend 'parts\.yaml:4:61: device_types\.big\.real_device "cuda:0/sm=64": the nccl backend puts each rank on --device' \
  --cluster parts.yaml --backend nccl --device cuda:0 --db "$T/sim.db"
# The local backend runs on one GPU: partitions of GPU 1 beside GPU 0's, or a --device of
# another GPU, are refused before any GPU is touched.
sed 's|real_device: cuda:0/sm=32|real_device: cuda:1/sm=32|' parts.yaml >two-gpus.yaml
refuse local_two_gpus 'two-gpus\.yaml:5:61: device_types\.mid\.real_device "cuda:1/sm=32": the local backend runs every worker on one GPU, here cuda:0 .*workers on several GPUs are not supported' \
  --cluster two-gpus.yaml --backend local --db "$T/sim.db"
refuse local_other_device 'parts\.yaml:4:61: .*here cuda:1 ' --cluster parts.yaml --backend local --device cuda:1 --db "$T/new.db"
sed 's|real_device: cuda:0/sm=32|real_device: cpu|' parts.yaml >cpu-worker.yaml
refuse local_cpu_worker 'cpu-worker\.yaml:5:61: device_types\.mid\.real_device "cpu": the local backend runs every worker on a GPU' \
  --cluster cpu-worker.yaml --backend local --db "$T/new.db"
# A malformed device: the loader's message, for real and sim alike.
sed 's|real_device: cuda:0/sm=32|real_device: gpu1|' parts.yaml >bad.yaml
refuse malformed 'bad\.yaml:5:61: device_types\.mid\.real_device: expected a device for `hetsim real`: cpu, cuda:I or cuda:I/sm=N .*got "gpu1"' \
  --cluster bad.yaml --backend local --db "$T/new.db"
expect_exit sim_malformed 2 "$H" "${sim[@]}" --cluster bad.yaml --db "$T/new.db"
check sim_malformed.message grep -q 'bad.yaml:5:61: device_types.mid.real_device: expected a device' "$T/err"
sed 's|real_device: "cuda:0/sm=64"|real_device: "cuda:0/sm=0"|' parts.yaml >zero.yaml
refuse zero_sms 'zero\.yaml:4:61: .*got "cuda:0/sm=0"' --cluster zero.yaml --backend local --db "$T/new.db"

# Without a GPU, the local run on the three partitions fails as any local run does there: exit
# 2 with the backend's message, nothing stored. (--device defaults to the file's GPU, cuda:0.)
"$H" doctor --json >doctor.json 2>/dev/null
check doctor_json grep -q '"gpus": *\[' doctor.json
if grep -q '"gpus": *\[\]' doctor.json; then
  refuse local_no_gpu '^hetsim real: --backend local: ' --cluster parts.yaml --backend local --db "$T/sim.db"
  check local_no_gpu.says_why grep -qiE 'GPU|CUDA' "$T/err"
  refuse local_no_gpu_new_db '^hetsim real: --backend local: ' --cluster parts.yaml --backend local \
    --device cuda:0/sm=8 --db "$T/new.db"
else
  echo "note: a GPU is present; the no-GPU checks are left to this machine's cli_gpu_* tests and tools/gpu-check.sh"
fi

# The cpu backend takes `real_device: cpu`: the run records each type's device and its
# discovered name in its options (type_devices), where `hetsim validate` can read them.
fashion_mnist_or_synthetic
sed -e 's|real_device: "cuda:0/sm=64"|real_device: cpu|' -e 's|real_device: cuda:0/sm=32|real_device: cpu|' \
  -e '/^    real_device/d' parts.yaml >cpu-types.yaml
expect_exit cpu_types_run 0 "$H" "${real[@]}" --cluster cpu-types.yaml --db "$T/cpu.db" --json
id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
cpu_name=$(val "$T/cpu.db" "SELECT json_extract(options, '\$.device_name') FROM run WHERE id = $id")
check cpu_types.recorded test "$(val "$T/cpu.db" "SELECT json_extract(options, '\$.type_devices.big.device') || '|' ||
  json_extract(options, '\$.type_devices.mid.device') || '|' || (json_extract(options, '\$.type_devices.big.device_name') = '$cpu_name') || '|' ||
  coalesce(json_extract(options, '\$.type_devices.small'), 'none') FROM run WHERE id = $id")" = "cpu|cpu|1|none"
# Every type is on this cpu, one device: worker 0's steps, timed before the run, predict all three.
check cpu_types.step_fits test "$(python3 -c 'import json, sys
f = json.load(open(sys.argv[1]))["step_fits"]; print(len(f), all(x == f[0] for x in f))' "$T/out")" = "3 True"
check cpu_types.worker_rows test "$(val "$T/cpu.db" "SELECT group_concat(device_type, '|') FROM (SELECT device_type FROM worker WHERE run_id = $id ORDER BY idx)")" = "big|mid|small"
# With --calib, each type with a device of its own is predicted by that device's calibration
# (here all are this cpu's: lbb runs; test_calib's worker_perf checks the mapping by type).
expect_exit cpu_types_calib 0 "$H" calib --device cpu --model mlp --batches 8,16,24 --min-reps 3 --max-reps 5 \
  --warmup 1 --db "$T/calib.db"
expect_exit cpu_types_calib_run 0 "$H" "${real[@]/ssgd/lbb}" --cluster cpu-types.yaml --calib "$T/calib.db" --db "$T/cpu.db" --json
check cpu_types_calib_run.complete grep -q '"status": "complete"' "$T/out"
check cpu_types_calib_run.no_step_fits grep -q '"step_fits": null' "$T/out"
# validate gives a type that ran on a device of its own (other than --device's) that device's
# calibration. On a cpu every type is on this cpu, so the run's record is edited to say that
# type big ran on a partition, whose calibration is then missing (exit 2, naming the type and
# the command), then present (under the partition's name).
vid=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
sqlite3 "$T/cpu.db" "UPDATE run SET options = json_set(options, '\$.type_devices.big.device', 'cuda:0/sm=16',
  '\$.type_devices.big.device_name', 'part (16 SMs)') WHERE id = $vid"
expect_exit validate_type_uncalibrated 2 "$H" validate "$vid" --db "$T/cpu.db" --calib "$T/calib.db"
check validate_type_uncalibrated.message grep -q '^hetsim validate: device type big ran on cuda:0/sm=16: .*"part (16 SMs)".*; run `hetsim calib --device cuda:0/sm=16 --model mlp` first$' "$T/err"
expect_exit validate_type_calib 0 "$H" calib --device cpu --name "part (16 SMs)" --model mlp --batches 8,16,24 \
  --min-reps 3 --max-reps 5 --warmup 1 --db "$T/calib.db"
expect_exit validate_type_run 0 "$H" validate "$vid" --db "$T/cpu.db" --calib "$T/calib.db" --json
check validate_type_run.calibrations test "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["type_calibrations"])' <"$T/out")" = \
  "{'big': 'part (16 SMs)', 'mid': '$cpu_name', 'small': '$cpu_name'}"
# validate's links are the run's backend's: a run recorded as --backend local is simulated on
# the local backend's communication calibration (`hetsim calib --device cuda:I` times it through
# the backend: real/real_comm_calib.h, test_real_comm_calib). Here the record is edited to say
# local: without such rows exit 2 naming the backend; then with the cpu's rows copied as
# backend local at twice the times, the all-reduce and send/recv it charges are twice the cpu's.
cp "$T/out" cpu-validate.json
check validate_cpu.backend test "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["comm_backend"])' <cpu-validate.json)" = cpu
sqlite3 "$T/cpu.db" "UPDATE run SET options = json_set(options, '\$.backend', 'local') WHERE id = $vid"
expect_exit validate_local_uncalibrated 2 "$H" validate "$vid" --db "$T/cpu.db" --calib "$T/calib.db"
check validate_local_uncalibrated.message grep -q '^hetsim validate: no local communication model for device ' "$T/err"
cp "$T/calib.db" calib-local.db
sqlite3 calib-local.db "INSERT INTO comm_sample(device_id, backend, op, world_size, bytes, median_s, p10_s, p90_s, count)
  SELECT device_id, 'local', op, world_size, bytes, 2 * median_s, 2 * p10_s, 2 * p90_s, count FROM comm_sample
  WHERE backend = 'cpu' AND op IN ('allreduce', 'p2p');
  INSERT INTO comm_model(device_id, backend, op, world_size, alpha_s, beta_bytes_per_s, r2)
  SELECT device_id, 'local', op, world_size, 2 * alpha_s, beta_bytes_per_s / 2, r2 FROM comm_model WHERE backend = 'cpu'"
expect_exit validate_local 0 "$H" validate "$vid" --db "$T/cpu.db" --calib calib-local.db --json
check validate_local.links python3 - cpu-validate.json "$T/out" <<'PY'
import json, sys
cpu, loc = (json.load(open(p)) for p in sys.argv[1:3])
assert loc["comm_backend"] == "local", loc["comm_backend"]
for k in ("allreduce_s", "p2p_s"):
    assert abs(loc[k] / cpu[k] - 2) < 1e-9, (k, loc[k], cpu[k])
PY
sqlite3 "$T/cpu.db" "UPDATE run SET options = json_set(options, '\$.backend', 'nccl') WHERE id = $vid"
expect_exit validate_nccl 2 "$H" validate "$vid" --db "$T/cpu.db" --calib calib-local.db
check validate_nccl.message grep -q 'ran on backend "nccl"; validate takes runs of the cpu and local backends' "$T/err"
# Without the key, the options are as before: no type_devices.
expect_exit cpu_plain_run 0 "$H" "${real[@]}" --cluster plain.yaml --db "$T/cpu.db" --json
id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
check cpu_plain.no_type_devices test "$(val "$T/cpu.db" "SELECT json_type(options, '\$.type_devices') IS NULL FROM run WHERE id = $id")" = 1

cli_finish
