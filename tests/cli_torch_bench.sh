#!/usr/bin/env bash
# bench/torch_resnet18.py (the PyTorch side of the GPU throughput comparison, docs/gpu.md) on the
# cpu with Debian's python3-torch, a few steps at batch 4: the JSON record of each --math, that
# --math strict turns TF32 off and repeats the same loss, the model's parameter count (the
# script refuses another), and bad usage (exit 2). No timed assertion: the rate is only checked
# to be finite and positive. On a machine with no usable GPU, --device cuda:0 exits 77.
# Skips (77) only when /usr/bin/python3 cannot import torch (HETSIM_TORCH_PYTHON names another).
# usage: cli_torch_bench.sh HETSIM_BINARY SOURCE_DIR
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX="torch_bench."

torch_python_or_skip
BENCH="$SRC/bench/torch_resnet18.py"
small=(--device cpu --batch 4 --steps 2 --warmup 1 --json)

# check_record FILE MATH TF32 LOSS_FILE: one JSON line with the fields bench_gpu_nn's records
# have, for the cpu, MATH and TF32 (true or false); its loss goes to LOSS_FILE.
check_record() {
  "$PY" - "$@" <<'PY'
import json, math, sys
path, want_math, want_tf32, loss_file = sys.argv[1], sys.argv[2], sys.argv[3] == "true", sys.argv[4]
lines = [l for l in open(path) if l.strip()]
assert len(lines) == 1, f"{len(lines)} lines"
r = json.loads(lines[0])
for k in ("model", "framework", "device", "batch", "steps", "math", "conv_tf32", "graph", "step_s",
          "images_per_s", "loss"):
    assert k in r, f"no {k}"
assert r["model"] == "resnet18" and r["framework"].startswith("torch "), r
assert r["device"] == "cpu" and r["batch"] == 4 and r["steps"] == 2 and r["graph"] is False, r
assert r["math"] == want_math and r["conv_tf32"] is want_tf32, r
assert math.isfinite(r["step_s"]) and r["step_s"] > 0, r
assert math.isfinite(r["images_per_s"]) and r["images_per_s"] > 0, r
assert abs(r["images_per_s"] * r["step_s"] - 4) < 1e-6 * 4, r
assert math.isfinite(r["loss"]) and r["loss"] > 0, r
open(loss_file, "w").write(repr(r["loss"]) + "\n")
PY
}

for m in default strict; do
  tf32=true
  [ "$m" = strict ] && tf32=false
  if expect_exit "runs_$m" 0 "$PY" "$BENCH" "${small[@]}" --math "$m"; then
    cp "$TMP/out" "$TMP/$m.json"
    check "record_$m" check_record "$TMP/$m.json" "$m" "$tf32" "$TMP/loss-$m" || cat "$TMP/$m.json"
  fi
done
# Strict math is deterministic: a second run from the same seed gives the same loss, bit for bit.
if expect_exit runs_strict_again 0 "$PY" "$BENCH" "${small[@]}" --math strict; then
  check_record "$TMP/out" strict false "$TMP/loss-strict-again" 2>/dev/null
  check strict_repeats cmp -s "$TMP/loss-strict" "$TMP/loss-strict-again"
fi
expect_exit text_output 0 "$PY" "$BENCH" --device cpu --batch 2 --steps 1 --warmup 0 --math strict
check text_names_math grep -q "math strict:" "$TMP/out"

expect_exit graph_needs_cuda 2 "$PY" "$BENCH" --device cpu --graph
check graph_needs_cuda_says grep -q -- "--graph needs a CUDA device" "$TMP/err"
expect_exit zero_steps 2 "$PY" "$BENCH" --device cpu --steps 0
expect_exit unknown_math 2 "$PY" "$BENCH" --device cpu --math fast
expect_exit bad_device 2 "$PY" "$BENCH" --device tpu:0
if "$PY" -c 'import sys, torch; sys.exit(1 if torch.cuda.is_available() else 0)' 2>/dev/null; then
  expect_exit no_gpu_skips 77 "$PY" "$BENCH" --device cuda:0 --steps 1 --warmup 0
  check no_gpu_says grep -q "^no GPU" "$TMP/out"
fi
cli_finish
