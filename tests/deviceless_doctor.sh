#!/usr/bin/env bash
# `hetsim doctor` with the CUDA toolkit's stub libcuda.so as the driver (label deviceless;
# CMakeLists.txt links the stub as libcuda.so.1 into a folder of the build and puts it first on
# LD_LIBRARY_PATH, naming it in HETSIM_CUDA_STUB_DIR): the driver is found, loaded from that
# folder and called the stub, there is no GPU, the GPU probes say "missing" naming the stub's
# error (none says "failed"), hetsim stays usable, and --cudnn-deviceprop FILE exits 1 without
# touching an existing FILE.
# Usage: bash tests/deviceless_doctor.sh /path/to/hetsim /path/to/source-dir
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=deviceless_doctor.

[ -n "${HETSIM_CUDA_STUB_DIR:-}" ] || { echo "HETSIM_CUDA_STUB_DIR is not set (ctest sets it): skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is needed to check JSON; skipped"; exit 77; }

if "$HETSIM" doctor --json >"$TMP/d.json" 2>"$TMP/d.err"; then ok exit_0; else bad exit_0 "$(head -c 300 "$TMP/d.err")"; fi
if out=$(python3 - "$TMP/d.json" "$HETSIM_CUDA_STUB_DIR" 2>&1 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
stub = sys.argv[2]
def find(name):
    m = [c for c in r["checks"] if c["name"] == name]
    assert len(m) == 1, "check %r appears %d times" % (name, len(m))
    return m[0]
assert r["build"]["cuda"] is True, r["build"]
assert r["usable"] is True
drv = find("CUDA driver")
assert drv["status"] == "ok", drv
assert drv["path"].startswith(stub), (drv["path"], stub)
assert "stub" in drv["detail"] and "CUDA_ERROR_STUB_LIBRARY" in drv["detail"], drv
assert r["gpus"] == [], r["gpus"]
gpu = find("GPU")
assert gpu["status"] == "missing" and "CUDA_ERROR_STUB_LIBRARY" in gpu["detail"], gpu
for n in ("cuDNN convolution", "cuBLAS GEMM", "NCCL all-reduce 1 rank", "NCCL 2 ranks on 1 GPU", "green contexts"):
    c = find(n)
    assert c["status"] == "missing", c
    # A probe stops at the first missing piece: a library this machine lacks, or the stub driver.
    assert "CUDA_ERROR_STUB_LIBRARY" in c["detail"] or "not found" in c["detail"] or "built without" in c["detail"], c
assert r["counts"]["failed"] == 0, [c for c in r["checks"] if c["status"] == "failed"]
PY
); then ok stub_driver_no_gpu; else bad stub_driver_no_gpu "$(echo "$out" | tail -3)"; fi

# --cudnn-deviceprop needs a GPU: exit 1, the old file kept, the reason on the probe line.
echo '{"kept": true}' >"$TMP/prop.json"
"$HETSIM" doctor --cudnn-deviceprop "$TMP/prop.json" >"$TMP/p.out" 2>"$TMP/p.err"
rc=$?
check deviceprop_exit_1 test "$rc" = 1
check deviceprop_file_kept test "$(cat "$TMP/prop.json")" = '{"kept": true}'
check deviceprop_line grep -q '^missing cuDNN device properties: ' "$TMP/p.out"
check deviceprop_no_tmp_left test -z "$(ls "$TMP" | grep '\.tmp')"
"$HETSIM" doctor --cudnn-deviceprop >/dev/null 2>"$TMP/u.err"
check deviceprop_usage test $? = 2
cli_finish
