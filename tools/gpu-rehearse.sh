#!/usr/bin/env bash
# tools/gpu-rehearse.sh: the device run (tools/gpu-device-run.sh) rehearsed on this machine, with
# no GPU, in the shape of the lent GPU machine (docs/gpu.md, "Rehearsing the device run"): the
# GPU libraries come only from the pip wheels that the machine's PyTorch pulls in, in a virtual
# environment whose python3 is first on PATH, and the CUDA toolkit is hidden (a private mount
# namespace puts an empty folder over it), so nothing can come from /usr/local/cuda by accident.
#
#   bash tools/gpu-rehearse.sh [--venv DIR] [--bundle ARCHIVE] [-- gpu-device-run.sh options]
#
# --venv DIR      the environment (default /opt/torch/.venv, the lent machine's path). Made when
#                 DIR/bin/python3 is missing: python3.12 -m venv, then pip install
#                 torch==$TORCH_VERSION (default 2.11.0, the lent machine's; about 3 GB from PyPI
#                 with its nvidia-* wheels).
# --bundle ARCHIVE  default build-gpu/hetsim-gpu-bundle.tar.xz (`make gpu-bundle`).
# What it checks, each an "ok"/"FAIL" line:
#   - gpu-env.sh chose cuDNN, NCCL and cuBLAS from the environment's wheels;
#   - hetsim doctor loaded each of them from there (and found no driver, no GPU);
#   - every gpu-check step is in summary.tsv, the results came back as OUT/gpu-check.tar.gz and
#     OUT/summary.tsv, and the run stayed inside its budget;
#   - the deviceless cuDNN test finalizes every zoo plan with the wheel's cuDNN from the
#     committed H100 properties (tests/data/cudnn-h100-sxm5.json), with no driver at all.
# The GPU steps themselves fail or skip here (no GPU): that is not a failure of the rehearsal.
# Needs root (unshare -m and mount). Exit status: 0 all checks passed, 1 one failed, 2 on bad
# usage or where the rehearsal cannot be set up.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
VENV=/opt/torch/.venv
ARCHIVE=$REPO/build-gpu/hetsim-gpu-bundle.tar.xz
TORCH_VERSION=${TORCH_VERSION:-2.11.0}
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) [ $# -ge 2 ] || { echo "gpu-rehearse.sh: --venv needs a folder" >&2; exit 2; }; VENV=$2; shift ;;
    --bundle) [ $# -ge 2 ] || { echo "gpu-rehearse.sh: --bundle needs a file" >&2; exit 2; }; ARCHIVE=$2; shift ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) echo "gpu-rehearse.sh: unknown argument \"$1\" (--help)" >&2; exit 2 ;;
  esac
  shift
done
[ -f "$ARCHIVE" ] || { echo "gpu-rehearse.sh: no bundle archive at $ARCHIVE (make gpu-bundle)" >&2; exit 2; }
ARCHIVE=$(cd "$(dirname "$ARCHIVE")" && pwd)/$(basename "$ARCHIVE")
[ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null ||
  { echo "gpu-rehearse.sh: needs root and unshare -m (a private mount namespace)" >&2; exit 2; }

if [ ! -x "$VENV/bin/python3" ]; then
  # The first that runs: a pyenv shim of a version that is not enabled is on PATH but fails.
  py=""
  for c in python3.12 python3; do
    "$c" -c 'import venv' 2>/dev/null && { py=$(command -v "$c"); break; }
  done
  [ -n "$py" ] || { echo "gpu-rehearse.sh: no python3.12 or python3 that runs, to make $VENV" >&2; exit 2; }
  echo "gpu-rehearse.sh: making $VENV with $py and torch==$TORCH_VERSION (a few minutes)"
  "$py" -m venv "$VENV" && "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy ||
    { echo "gpu-rehearse.sh: could not make $VENV" >&2; exit 2; }
fi

# The toolkit's real folders (/usr/local/cuda is a link to one of them).
hide=()
for d in /usr/local/cuda /usr/local/cuda-*; do
  [ -e "$d" ] || continue
  r=$(readlink -f "$d")
  [ -d "$r" ] && [[ " ${hide[*]-} " != *" $r "* ]] && hide+=("$r")
done

T=$(mktemp -d /tmp/hetsim-rehearse.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/out"
echo "rehearsal: $VENV, $ARCHIVE; hidden: ${hide[*]:-nothing}; work: $T"

# The run itself, inside the namespace: only the venv's python3 and its wheels.
unshare -m env -i HOME="${HOME:-/root}" PATH="$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  OUT="$T/out" HETSIM_GPU_WORK="$T/work" HETSIM_GPU_BUNDLE="$ARCHIVE" T="$T" REPO="$REPO" \
  bash -c '
    n=$1; shift
    for d in "${@:1:n}"; do mount -t tmpfs -o size=1m none "$d" || exit 2; done
    shift "$n"
    cd "$REPO" || exit 2
    start=$(date +%s)
    bash tools/gpu-device-run.sh "$@" >"$T/run.log" 2>&1
    echo "$?" >"$T/run.rc"
    echo $(( $(date +%s) - start )) >"$T/run.seconds"
    B=$HETSIM_GPU_WORK/bundle/hetsim-gpu-bundle
    cd "$B" && . ./gpu-env.sh 2>/dev/null
    env | grep "^HETSIM_.*_PATH=" >"$T/env.chosen"
    HETSIM_SOURCE_DIR=$B HETSIM_CUDNN_DEVICEPROP=$B/tests/data/cudnn-h100-sxm5.json \
      tests/test_deviceless_cudnn >"$T/deviceless.log" 2>&1
    echo "$?" >"$T/deviceless.rc"
  ' rehearse "${#hide[@]}" ${hide[@]+"${hide[@]}"} "$@"

fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
sed 's/^/  | /' "$T/run.log" | tail -n 30
site=$("$VENV/bin/python3" -c 'import site; print(site.getsitepackages()[0])')
for v in HETSIM_CUDNN_PATH HETSIM_NCCL_PATH HETSIM_CUBLAS_PATH; do
  chosen=$(grep "^$v=" "$T/env.chosen" | cut -d= -f2-)
  if [[ "$chosen" == "$site"/nvidia/* ]]; then ok "gpu-env.sh: $v=$chosen"; else bad "gpu-env.sh: $v=${chosen:-unset}, not under $site/nvidia"; fi
done
res=$(ls -d "$T"/work/notebooks-data/gpu-* 2>/dev/null | head -1)
if [ -n "$res" ] && [ -f "$res/doctor.json" ]; then
  # One line per library ("ok cuDNN 9.19.0 PATH"), and the GPU check's status, from doctor's JSON.
  dj=$(python3 - "$res/doctor.json" <<'PY' 2>&1
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    if c["section"] == "library" and c["name"] in ("cuBLAS", "cuDNN", "NCCL"):
        print(c["status"], c["name"], c["version"], c["path"])
    if c["section"] == "gpu" and c["name"] == "GPU":
        print(c["status"], "GPU")
PY
)
  for lib in cuBLAS cuDNN NCCL; do
    line=$(grep -E "^[a-z]+ $lib " <<<"$dj" | head -1)
    if [[ "$line" == ok* && "$line" == *"$site"/nvidia/* ]]; then ok "doctor: $line"; else bad "doctor: ${line:-no $lib line}"; fi
  done
  if grep -q "^missing GPU" <<<"$dj"; then ok "doctor: no GPU here, as expected"; else bad "doctor found a GPU without a driver?"; fi
else
  bad "no results folder with doctor.json under $T/work/notebooks-data"
fi
steps=$(bash "$REPO/tools/gpu-check.sh" --list | wc -l)
rows=$([ -n "$res" ] && tail -n +2 "$res/summary.tsv" | cut -f1 | sort -u | wc -l)
if [ "${rows:-0}" = "$steps" ]; then ok "summary.tsv: all $steps steps recorded"; else bad "summary.tsv: ${rows:-0} of $steps steps recorded"; fi
if [ -s "$T/out/gpu-check.tar.gz" ] && [ -s "$T/out/summary.tsv" ] && tar -tzf "$T/out/gpu-check.tar.gz" >/dev/null; then
  ok "OUT holds gpu-check.tar.gz ($(stat -c %s "$T/out/gpu-check.tar.gz") bytes) and summary.tsv"
else
  bad "OUT lacks gpu-check.tar.gz or summary.tsv"
fi
echo "  (the run: exit $(cat "$T/run.rc"), $(cat "$T/run.seconds") s)"
grep -q -- "budget" "$T/run.log" && [ "$(cat "$T/run.seconds")" -le 280 ] && ok "the run ended inside the default budget" ||
  bad "the run took $(cat "$T/run.seconds") s"
plans=$(grep -m1 "plans finalized" "$T/deviceless.log" | sed 's/.*: \([0-9]* convolutions.*\)/\1/')
if [ "$(cat "$T/deviceless.rc")" = 0 ]; then ok "deviceless cuDNN with the wheel's cuDNN: $plans"
else bad "deviceless cuDNN with the wheel's cuDNN (exit $(cat "$T/deviceless.rc")):"; tail -n 20 "$T/deviceless.log"; fi
exit $fail
