#!/usr/bin/env bash
# CLI tests for `hetsim doctor`: the JSON schema (docs/cli.md), the text format, exit codes, and
# that a missing or unloadable library (HETSIM_CUDNN_PATH / HETSIM_NCCL_PATH pointing to an empty
# folder or to a file that is not an ELF library) and missing data are reported as "missing" with
# the reason, not a crash; that `hetsim` says it does not link MPI and where `hetsim-mpi` is, and
# `hetsim-mpi` that it does. Works with or without a GPU, CUDA or MPI in the build.
# Usage: bash tests/cli_doctor.sh /path/to/hetsim /path/to/source-dir
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX=doctor.

command -v python3 >/dev/null || { echo "python3 is needed to check JSON; skipped"; exit 77; }

# doctor_json NAME [ENV=VALUE...]: runs `hetsim doctor --json` with the environment given; the
# output lands in $TMP/NAME.json. Exit status must be 0.
doctor_json() {
  local name=$1
  shift
  env "$@" "$HETSIM" doctor --json >"$TMP/$name.json" 2>"$TMP/$name.err"
  local rc=$?
  if [ $rc -ne 0 ]; then
    bad "$name" "exit $rc; stderr: $(head -c 300 "$TMP/$name.err")"
    return 1
  fi
  return 0
}

# check_json NAME FILE PYTHON: runs the Python snippet with `r` bound to the parsed JSON of FILE.
# The snippet asserts; the first failed assertion is the reason shown.
check_json() {
  local name=$1 file=$2 code=$3
  local out
  if out=$(python3 - "$file" 2>&1 <<EOF
import json, sys
r = json.load(open(sys.argv[1]))
def find(name):
    m = [c for c in r["checks"] if c["name"] == name]
    assert len(m) == 1, "check %r appears %d times" % (name, len(m))
    return m[0]
has_gpu = len(r["gpus"]) > 0
$code
EOF
  ); then ok "$name"; else bad "$name" "$(echo "$out" | tail -3)"; fi
}

# 1. The schema.
if doctor_json plain; then
  check_json schema "$TMP/plain.json" '
assert set(r) == {"schema_version", "hetsim_version", "binary", "build", "usable", "checks", "gpus",
                  "counts"}, sorted(r)
assert r["schema_version"] == 1
assert isinstance(r["hetsim_version"], str) and r["hetsim_version"]
assert r["binary"] == "hetsim", r["binary"]
assert set(r["build"]) == {"cuda", "cudnn", "nccl", "mpi", "hetsim_mpi", "sanitized"}
assert r["build"]["mpi"] is False, "hetsim never links libmpi"
assert all(isinstance(v, bool) for v in r["build"].values())
assert r["usable"] is True
keys = {"section", "name", "status", "version", "path", "detail", "value", "expected"}
for c in r["checks"]:
    assert set(c) == keys, c
    assert c["section"] in ("build", "library", "gpu", "probe", "data", "store"), c
    assert c["status"] in ("ok", "missing", "failed"), c
    assert isinstance(c["name"], str) and c["name"]
    for k in ("version", "path", "detail"):
        assert c[k] is None or (isinstance(c[k], str) and c[k]), (k, c)
    for k in ("value", "expected"):
        assert c[k] is None or isinstance(c[k], (int, float)), (k, c)
    if c["status"] != "ok":
        assert c["detail"], ("a check that is not ok must say why", c)
for g in r["gpus"]:
    assert set(g) == {"index", "name", "uuid", "compute_capability", "sms", "memory_bytes",
                      "clock_khz", "memory_clock_khz", "memory_bus_bits"}, g
    assert g["uuid"].startswith("GPU-") and g["sms"] > 0 and g["memory_bytes"] > 0
counts = {s: sum(1 for c in r["checks"] if c["status"] == s) for s in ("ok", "missing", "failed")}
assert r["counts"] == counts, (r["counts"], counts)
'
  check_json names "$TMP/plain.json" '
for n in ("hetsim", "GSL", "SQLite", "libyaml", "OpenBLAS", "zlib", "CUDA runtime", "MPI", "CUDA driver",
          "cuBLAS", "cuDNN", "NCCL", "cuDNN convolution", "cuBLAS GEMM", "NCCL all-reduce 1 rank",
          "NCCL 2 ranks on 1 GPU", "green contexts", "MPS", "Fashion-MNIST", "results store"):
    find(n)
for n in ("hetsim", "GSL", "SQLite", "libyaml", "OpenBLAS", "zlib", "results store"):
    assert find(n)["status"] == "ok", find(n)
assert find("hetsim")["version"] == r["hetsim_version"]
assert find("SQLite")["version"].startswith("3.")
'
  check_json gpu_or_missing "$TMP/plain.json" '
gpu_checks = [c for c in r["checks"] if c["section"] == "gpu"]
if has_gpu:
    assert len(gpu_checks) == len(r["gpus"]) and all(c["status"] == "ok" for c in gpu_checks)
else:
    # Without a GPU, the GPU and its probes say missing with a reason; none claims "failed".
    assert [c["status"] for c in gpu_checks] == ["missing"], gpu_checks
    for n in ("cuDNN convolution", "cuBLAS GEMM", "NCCL all-reduce 1 rank", "NCCL 2 ranks on 1 GPU",
              "green contexts"):
        c = find(n)
        assert c["status"] == "missing" and c["detail"], c
if not r["build"]["cuda"]:
    for n in ("CUDA runtime", "CUDA driver", "cuBLAS", "cuDNN", "NCCL"):
        assert find(n)["status"] == "missing" and "built without CUDA" in find(n)["detail"], find(n)
'
# MPI: hetsim does not link it; it names the hetsim-mpi the build put beside it (the real
# binary's folder, also when $HETSIM is a wrapper), or says that there is none.
  check_json mpi "$TMP/plain.json" '
c = find("MPI")
assert "launcher" in c["detail"] and "not linked into hetsim" in c["detail"], c
if r["build"]["hetsim_mpi"]:
    assert c["status"] == "ok" and c["path"].endswith("/hetsim-mpi"), c
else:
    assert c["status"] == "missing" and "found no MPI" in c["detail"], c
assert "MPI no" in find("hetsim")["detail"], find("hetsim")
'
fi
MPIBIN="$(dirname "$HETSIM")/hetsim-mpi"
if [ -x "$MPIBIN" ]; then
  # Open MPI's allocations outlive the process; LeakSanitizer would report them (cli_sweep.sh).
  if HETSIM="$MPIBIN" doctor_json mpibin ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"; then
    check_json mpi_binary "$TMP/mpibin.json" '
assert r["binary"] == "hetsim-mpi" and r["build"]["mpi"] is True and r["build"]["hetsim_mpi"] is True
c = find("MPI")
assert c["status"] == "ok" and c["version"] and "MPI_COMM_WORLD" in c["detail"], c
assert "libmpi" in c["path"], c
assert "MPI yes" in find("hetsim-mpi")["detail"]
'
  fi
fi

# 2. cuDNN pointed to an empty folder: missing, naming the folder; nothing else breaks.
mkdir -p "$TMP/empty"
if doctor_json cudnn_empty HETSIM_CUDNN_PATH="$TMP/empty"; then
  check_json cudnn_empty "$TMP/cudnn_empty.json" "
c = find('cuDNN')
assert c['status'] == 'missing', c
if r['build']['cudnn']:
    assert 'libcudnn.so.9 not found' in c['detail'] and '$TMP/empty' in c['detail'], c
    assert c['path'] is None and c['version'] is None
    p = find('cuDNN convolution')
    assert p['status'] == 'missing' and 'libcudnn.so.9' in p['detail'], p
assert r['usable'] is True
"
fi

# 3. A file named libcudnn.so.9 that is not a library, and the same for NCCL.
mkdir -p "$TMP/broken"
printf 'not an ELF file\n' >"$TMP/broken/libcudnn.so.9"
printf 'not an ELF file either\n' >"$TMP/broken/libnccl.so.2"
if doctor_json unloadable HETSIM_CUDNN_PATH="$TMP/broken" HETSIM_NCCL_PATH="$TMP/broken"; then
  check_json unloadable "$TMP/unloadable.json" "
for lib, so, probes in (('cuDNN', 'libcudnn.so.9', ('cuDNN convolution',)),
                        ('NCCL', 'libnccl.so.2', ('NCCL all-reduce 1 rank', 'NCCL 2 ranks on 1 GPU'))):
    c = find(lib)
    assert c['status'] == 'missing', c
    if r['build'][lib.lower()]:
        assert so + ' could not be loaded' in c['detail'] and '$TMP/broken/' + so in c['detail'], c
        for p in probes:
            assert find(p)['status'] == 'missing' and so in find(p)['detail'], find(p)
"
fi

# 4. Fashion-MNIST missing: the command that installs it.
if doctor_json nodata HETSIM_FASHION_MNIST_DIR="$TMP/empty"; then
  check_json nodata "$TMP/nodata.json" '
c = find("Fashion-MNIST")
assert c["status"] == "missing" and "dataset-fashion-mnist" in c["detail"], c
'
fi
# The synthetic stand-in (docs/data.md) is ok, and says it is not the data set's files.
if doctor_json synthdata HETSIM_FASHION_MNIST_DIR=synthetic; then
  check_json synthdata "$TMP/synthdata.json" '
c = find("Fashion-MNIST")
assert c["status"] == "ok" and "synthetic stand-in" in c["detail"], c
'
fi

# 5. The text format: one line per check, the status first, padded to 7 columns.
if HETSIM_CUDNN_PATH="$TMP/empty" "$HETSIM" doctor >"$TMP/text" 2>"$TMP/text.err"; then
  n_json=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["checks"]))' "$TMP/cudnn_empty.json" 2>/dev/null)
  n_text=$(wc -l <"$TMP/text")
  if ! grep -qvE '^(ok      |missing |failed  )[^ ]' "$TMP/text" && [ "$n_text" = "$n_json" ] &&
     grep -q '^ok      SQLite 3\.' "$TMP/text" && grep -q '^missing cuDNN: ' "$TMP/text"; then
    ok text
  else
    bad text "unexpected lines ($n_text lines, JSON has $n_json checks): $(head -c 400 "$TMP/text")"
  fi
else
  bad text "exit $?: $(head -c 300 "$TMP/text.err")"
fi

# 6a. OpenBLAS's thread pool: one thread unless the user sized it (nn/nn_blas.h: its threads
# spin ~60 ms in every process otherwise); a size the user gives is kept.
if [ "$(nproc)" -gt 1 ] && [ -z "${HETSIM_TEST_SLOW:-}" ]; then
  threads_of() { python3 -c 'import json,sys
c = [c for c in json.load(sys.stdin)["checks"] if c["name"] == "OpenBLAS"][0]
print(c["detail"].split()[0])'; }
  got=$(env -u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS -u OMP_NUM_THREADS "$HETSIM" doctor --json 2>/dev/null | threads_of)
  if [ "$got" = 1 ]; then ok blas_pool_one; else bad blas_pool_one "got: $got threads"; fi
  got=$(env OPENBLAS_NUM_THREADS=2 "$HETSIM" doctor --json 2>/dev/null | threads_of)
  if [ "$got" = 2 ]; then ok blas_pool_user; else bad blas_pool_user "got: $got threads"; fi
fi

# 6. OpenBLAS's kernels: on a CPU with AVX2 and FMA, never its generic ones (OpenBLAS 0.3.21
# takes Prescott's on CPUs newer than itself; hetsim starts again with OPENBLAS_CORETYPE set,
# nn/nn_blas.h). Skipped under valgrind, where hetsim leaves the choice alone.
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && [ -z "${HETSIM_TEST_SLOW:-}" ]; then
  env -u OPENBLAS_CORETYPE -u HETSIM_BLAS_CORE "$HETSIM" doctor --json >"$TMP/blas.json" 2>/dev/null
  core=$(python3 -c 'import json,sys
c = [c for c in json.load(open(sys.argv[1]))["checks"] if c["name"] == "OpenBLAS"][0]
print(c["detail"].split("MAX_THREADS")[0].split()[-1])' "$TMP/blas.json" 2>/dev/null)
  case "$core" in
    ""|Prescott|Core2|Penryn|Dunnington|Nehalem|Atom) bad blas_core "OpenBLAS runs the generic \"$core\" kernels on an AVX2 CPU" ;;
    *) ok blas_core ;;
  esac
  core=$(OPENBLAS_CORETYPE=Haswell "$HETSIM" doctor --json 2>/dev/null | python3 -c 'import json,sys
c = [c for c in json.load(sys.stdin)["checks"] if c["name"] == "OpenBLAS"][0]
print(c["detail"].split("MAX_THREADS")[0].split()[-1], "set by hetsim" in c["detail"])')
  if [ "$core" = "Haswell False" ]; then ok blas_core_user_choice; else bad blas_core_user_choice "got: $core"; fi
fi

# 7. Usage.
"$HETSIM" doctor --bogus >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 2 ] && grep -q 'unknown argument' "$TMP/err"; then ok usage; else bad usage "exit $rc"; fi
if "$HETSIM" doctor --help | grep -q 'usage: hetsim doctor'; then ok help; else bad help "no usage line"; fi

cli_finish
