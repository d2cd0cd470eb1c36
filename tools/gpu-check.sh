#!/usr/bin/env bash
# tools/gpu-check.sh: every GPU check of hetsim in one command, for the rare few minutes on a GPU
# machine (docs/gpu.md). Run it from a carried bundle (`make gpu-bundle`; it sits at the
# bundle's root as gpu-check.sh) after `. ./gpu-env.sh`, or through tools/gpu-device-run.sh:
#
#   ./gpu-check.sh                       the steps in order while the budget lasts, results in
#                                        notebooks-data/gpu-<card>/
#   ./gpu-check.sh --resume              the steps not run yet, those the budget cut off, and the
#                                        calibrations stopped at their time limit (partial)
#   ./gpu-check.sh --step calib-whole    one step (repeatable: --step a --step b), run again
#   ./gpu-check.sh --from calib-whole    that step and every one after it
#   ./gpu-check.sh --list                the steps, one a line
#   ./gpu-check.sh --dry-run             what each step would run and its time limit, and whether
#                                        the bundle holds everything the steps need; runs nothing
#                                        on a GPU
# Options: --bundle DIR (default: this script's folder, or the repository's build-gpu bundle),
# --out DIR (default ROOT/notebooks-data/gpu-<card>), --root ROOT (default the bundle's root),
# --card NAME, --step-limit SECONDS (every step's limit, in place of each step's own),
# --budget SECONDS (default 280: the whole run), --models LIST (default
# resnet18,cnn,mlp,mobilenetv2,vgg16: the first is the model of calib-partitions, local and nccl
# and calib-whole's first calibration, the others calib-whole's zoo; the deviceless rehearsal,
# tests/deviceless_gpu_check_emu.sh, gives mlp), --pack FILE (after every step, FILE is written
# anew as a .tar.gz of the results folder, so that a run cut off still leaves its results in one
# file; FILE must not be inside the results folder).
#
# The budget: a lent GPU machine gives a session 15 minutes in all, starting it included, and
# one command at most 10. The default budget fits one command of about 5 minutes, so that a
# second command (--resume) can follow on the same machine; --budget 1500 runs everything
# where time is not short. Steps come in the order of what the first GPU contact most needs:
# whether everything runs, then how fast, then the finer measurements. Each step is a process
# of its own under `timeout`, at most its own limit (below; --step-limit replaces them), and
# never past the budget; a step that would start with under 30 s left is recorded as skipped,
# out of time, and --resume runs it later.
#
# Steps, in order (limit in seconds):
#   doctor            (60) the machine (env.txt: the bundle's version, nvidia-smi, the Python
#                     packages, the libraries gpu-env.sh chose), hetsim doctor --json and cuDNN's
#                     device-properties JSON (one run of its probes)
#   deviceless        (30) cuDNN plans for every zoo convolution from that recorded JSON
#   ctest-gpu         (240) the gpu-labelled tests (ctest -L gpu's programs and scripts, carried
#                     in the bundle, run one by one, each at most 90 s; skipped when every one
#                     of them skipped)
#   bench             (120) resnet18 training throughput: hetsim eager and CUDA graph, strict
#                     and fast math, and PyTorch (bench/torch_resnet18.py) on the same GPU: its
#                     default math eager and as a CUDA graph, and strict math eager
#   calib-whole       (150) calibration on the whole GPU (calib.db, CSV exports): resnet18 and
#                     the local backend's communication first (half the time: the local step
#                     needs them), then the rest of the zoo
#   profile           (120) tools/hetsim_profile.py: PyTorch's step times of the same models on
#                     the same GPU under strict math, to set against hetsim's calibration
#   calib-partitions  (180) calibration of resnet18 (the local step's model) on three partitions
#                     of different sizes (1/8, 1/4, 1/2 of the GPU's SMs, multiples of 8)
#   local             (180) hetsim real --backend local: a cluster file of three partitions of
#                     different sizes (real_device: 1/8, 1/4, 1/2 of the SMs), ssgd, localsgd
#                     and lbb, and every worker on equal partitions; hetsim validate of each run,
#                     and hetsim sim of the three-partition cluster on the partitions'
#                     calibrations
#   agreement         (60) cpu-vs-cuda agreement (test_gpu_nn) under fast math (strict math's
#                     is ctest-gpu's run of it)
#   nccl              (90) hetsim real --backend nccl, two ranks on GPU 0 (where NCCL allows it;
#                     else one rank, world size 1); then three, the third a worker that joins
#                     at once (a sub-communicator of the first two until it holds worker 0's
#                     replica, sent over NCCL, then the world's)
#
# Results (one folder to commit): summary.tsv (step, status, exit code, seconds, note: the
# failing step's last message; a step run again gets a row more, and its last row counts;
# status ok, skipped, failed, timeout, or partial: a calibration that stopped at its time limit
# with what it measured stored, which --resume goes on with),
# logs/STEP.log (everything each step printed), and each step's files. A failed or timed-out
# step is recorded and the next one still runs. Exit status: 0 when every step run was ok or
# skipped, 1 when one failed, timed out or was partial, 2 on bad usage; the dry run: 0 when the
# bundle holds everything (and, run from the repository, was built from its HEAD), 1 when
# something required is missing or the bundle is stale.
set -u

STEPS=(doctor deviceless ctest-gpu bench calib-whole profile calib-partitions local agreement nccl)
MODELS=resnet18,cnn,mlp,mobilenetv2,vgg16 # resnet18 first: the local step's model (--models)

# limit STEP: the most seconds STEP may run (the header's list; --step-limit replaces it).
limit() {
  case "$1" in
    deviceless) echo 30 ;;
    doctor | agreement) echo 60 ;;
    nccl) echo 90 ;;
    bench | profile) echo 120 ;;
    calib-whole) echo 150 ;;
    calib-partitions | local) echo 180 ;;
    ctest-gpu) echo 240 ;;
  esac
}

usage() {
  sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
}

die_usage() {
  echo "gpu-check.sh: $*" >&2
  echo "run \`gpu-check.sh --help\` for the options" >&2
  exit 2
}

is_step() {
  local s
  for s in "${STEPS[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}

# --- what each step needs from the bundle --------------------------------------------------

# needs STEP: "required" and "optional" files (relative to the bundle) of STEP, one per line as
# "req PATH" or "opt PATH".
needs() {
  case "$1" in
    doctor) echo "req hetsim" ;;
    deviceless) printf '%s\n' "req tests/test_deviceless_cudnn" "req tests/data/cudnn-h100-sxm5.json" ;;
    ctest-gpu)
      printf '%s\n' "req tests/test_gpu_probe" "req tests/test_gpu_nn" "req tests/test_gpu_real" \
        "req tests/test_gpu_partitions" "req tests/cli_gpu_real.sh" "req tests/cli_gpu_ranks.sh" \
        "req tests/cli-lib.sh" ;;
    agreement) echo "req tests/test_gpu_nn" ;;
    bench) printf '%s\n' "req bench/bench_gpu_nn" "opt bench/torch_resnet18.py" ;;
    calib-whole | calib-partitions) echo "req hetsim" ;;
    profile) printf '%s\n' "opt tools/hetsim_profile.py" ;;
    local) printf '%s\n' "req hetsim" ;;
    nccl) printf '%s\n' "req hetsim" ;;
  esac
}

# what STEP: the commands the step runs, for --dry-run.
what() {
  case "$1" in
    doctor) echo "hetsim doctor --json --cudnn-deviceprop cudnn-deviceprop.json > doctor.json" ;;
    deviceless) echo "HETSIM_CUDNN_DEVICEPROP=cudnn-deviceprop.json tests/test_deviceless_cudnn > deviceless.txt" ;;
    ctest-gpu) echo "each tests/test_gpu_* and tests/cli_gpu_*.sh (ctest -L gpu's), at most 90 s each > ctest-gpu.txt" ;;
    agreement) echo "HETSIM_CUDA_MATH=fast tests/test_gpu_nn > agreement-fast.txt (strict: ctest-gpu's)" ;;
    bench) echo "bench/bench_gpu_nn --model resnet18 --batch 256 [--graph] --json (strict, fast); python3 bench/torch_resnet18.py --math default [--graph], --math strict --json > bench.jsonl" ;;
    calib-whole) echo "hetsim calib --device cuda:0 --model $RUN_MODEL --comm-world 3 --db calib.db --json > calib-whole.json (compute, and the local backend's all-reduce and send/recv), then --model ${ZOO:-(none)} --no-comm > calib-whole-zoo.json; CSV exports" ;;
    calib-partitions) echo "hetsim calib --device cuda:0/sm=S --model $RUN_MODEL --batches 8,16,32,64,128 --db calib.db, S = 1/8 (with --comm-world 3), 1/4, 1/2 (--no-comm) of the SMs; CSV exports" ;;
    profile) echo "python3 tools/hetsim_profile.py --model M --device cuda:0 --math strict --out profile-M.json for M in cnn, resnet18, mobilenetv2" ;;
    local) echo "hetsim real --backend local --cluster local-parts.yaml (real_device cuda:0/sm=S, S = 1/8, 1/4, 1/2 of the SMs; ssgd, localsgd, lbb with its batches per worker) and --device cuda:0/sm=S --workers 3 ... --db local.db; hetsim validate RUN --calib calib.db --json > local-validate-RUN.json; hetsim sim --cluster local-parts.yaml --calib calib.db --json" ;;
    nccl) echo "two ranks RANK=0,1 WORLD_SIZE=2 hetsim real --backend nccl --device cuda:0 ... (NCCL 2.30+; else one rank), then three with --cluster nccl-join.yaml (a join at 0 s), --db nccl.db" ;;
  esac
}

# --- options --------------------------------------------------------------------------------

BUNDLE="" OUT="" ROOT="" CARD="" DRY=0 LIST=0 FROM="" ONLY=() STEP_LIMIT="" BUDGET=280 RESUME=0 PACK="" INTERNAL=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --list) LIST=1 ;;
    --dry-run) DRY=1 ;;
    --bundle) [ $# -ge 2 ] || die_usage "--bundle needs a folder"; BUNDLE=$2; shift ;;
    --out) [ $# -ge 2 ] || die_usage "--out needs a folder"; OUT=$2; shift ;;
    --root) [ $# -ge 2 ] || die_usage "--root needs a folder"; ROOT=$2; shift ;;
    --pack) [ $# -ge 2 ] && [ -n "$2" ] || die_usage "--pack needs a file name"; PACK=$2; shift ;;
    --resume) RESUME=1 ;;
    --card) [ $# -ge 2 ] || die_usage "--card needs a name"; CARD=$2; shift ;;
    --step) [ $# -ge 2 ] || die_usage "--step needs a name"; is_step "$2" || die_usage "unknown step \"$2\" (steps: ${STEPS[*]})"; ONLY+=("$2"); shift ;;
    --from) [ $# -ge 2 ] || die_usage "--from needs a name"; is_step "$2" || die_usage "unknown step \"$2\" (steps: ${STEPS[*]})"; FROM=$2; shift ;;
    --step-limit) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die_usage "--step-limit needs seconds (a positive integer)"; STEP_LIMIT=$2; shift ;;
    --budget) [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die_usage "--budget needs seconds (a positive integer)"; BUDGET=$2; shift ;;
    --models) [ $# -ge 2 ] && [[ $2 =~ ^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$ ]] || die_usage "--models needs model names, comma-separated"; MODELS=$2; shift ;;
    --internal-step) INTERNAL=$2; shift ;; # the script runs each step as a process of its own
    *) die_usage "unknown argument \"$1\"" ;;
  esac
  shift
done
[ -n "$FROM" ] && [ ${#ONLY[@]} -gt 0 ] && die_usage "give --step or --from, not both"
[ "$RESUME" = 1 ] && [ ${#ONLY[@]} -gt 0 ] && die_usage "give --step or --resume, not both (--step runs a step again)"

RUN_MODEL=${MODELS%%,*}                            # calib-partitions', local's and nccl's model
ZOO=""
[[ $MODELS == *,* ]] && ZOO=${MODELS#*,}           # calib-whole's other models

if [ "$LIST" = 1 ]; then
  printf '%s\n' "${STEPS[@]}"
  exit 0
fi

HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "$BUNDLE" ]; then
  if [ -x "$HERE/hetsim" ]; then BUNDLE=$HERE                      # run from inside a bundle
  else BUNDLE=$(cd "$HERE/.." && pwd)/build-gpu/hetsim-gpu-bundle; fi # tools/ of the repository
fi
[ -d "$BUNDLE" ] || { echo "gpu-check.sh: no bundle at $BUNDLE (make gpu-bundle, or --bundle DIR)" >&2; exit 2; }
BUNDLE=$(cd "$BUNDLE" && pwd)
H="$BUNDLE/hetsim"

# The steps that run: all, --step ones, or from --from on.
selected() {
  local s on=0
  if [ ${#ONLY[@]} -gt 0 ]; then printf '%s\n' "${ONLY[@]}"; return; fi
  for s in "${STEPS[@]}"; do
    [ -z "$FROM" ] || [ "$s" = "$FROM" ] && on=1
    [ "$on" = 1 ] && echo "$s"
  done
}

# --- dry run: list the steps, check the bundle ----------------------------------------------

if [ "$DRY" = 1 ]; then
  missing=0
  echo "bundle: $BUNDLE"
  echo "budget: ${BUDGET}s in all"
  while read -r s; do
    echo "step $s"
    echo "  limit: ${STEP_LIMIT:-$(limit "$s")}s"
    echo "  runs: $(what "$s")"
    while read -r kind path; do
      [ -n "$path" ] || continue
      if [ -e "$BUNDLE/$path" ]; then
        if [[ "$path" != *.sh && "$path" != *.py && "$path" != *.json && ! -x "$BUNDLE/$path" ]]; then
          echo "  MISSING $path: present but not executable"
          missing=$((missing + 1))
        else
          echo "  ok      $path"
        fi
      elif [ "$kind" = req ]; then
        echo "  MISSING $path"
        missing=$((missing + 1))
      else
        echo "  absent  $path (optional: the step records itself skipped)"
      fi
    done < <(needs "$s")
  done < <(selected)
  # The binary must start here (static dependencies) and answer; without a GPU doctor says so.
  if [ -x "$H" ]; then
    if "$H" doctor --json >/dev/null 2>&1; then echo "ok      hetsim doctor runs"
    else echo "MISSING a hetsim that runs: \`$H doctor --json\` failed"; missing=$((missing + 1)); fi
  fi
  for f in gpu-env.sh gpu-check.sh VERSION; do
    if [ -e "$BUNDLE/$f" ]; then echo "ok      $f"; else echo "MISSING $f"; missing=$((missing + 1)); fi
  done
  # Run from the repository: the bundle folder and the archive beside it (what is carried) must
  # be built from the tree as it is now, or the device would run old code.
  repo=$(cd "$HERE/.." && pwd)
  if [ "$BUNDLE" = "$repo/build-gpu/hetsim-gpu-bundle" ] && head=$(git -C "$repo" describe --always --dirty 2>/dev/null); then
    for v in "folder:$(cat "$BUNDLE/VERSION" 2>/dev/null)" \
        "archive:$(tar -xOf "$repo/build-gpu/hetsim-gpu-bundle.tar.xz" hetsim-gpu-bundle/VERSION 2>/dev/null)"; do
      if [ "${v#*:}" = "$head" ]; then
        echo "ok      the bundle's ${v%%:*} is of $head"
        case $head in *-dirty) echo "note    built from a tree with changes not committed: rebuild after the last edit" ;; esac
      else
        echo "MISSING a fresh bundle ${v%%:*}: built from ${v#*:}, the tree is $head (make gpu-bundle)"
        missing=$((missing + 1))
      fi
    done
  fi
  for t in timeout python3; do
    if command -v "$t" >/dev/null 2>&1; then echo "ok      $t on PATH"; else echo "note    $t not on PATH here"; fi
  done
  if [ "$missing" -gt 0 ]; then
    echo "dry run: $missing thing(s) missing from the bundle, or stale"
    exit 1
  fi
  echo "dry run: the bundle holds everything the steps need"
  exit 0
fi

# --- one step (run by the script itself as `--internal-step NAME`, in OUT) ------------------

# The card's SM count and name from doctor.json (written by the doctor step).
# Without them (the doctor step failed or hung), PyTorch's view of GPU 0.
gpu_field() {
  python3 - "$OUT/doctor.json" "$1" <<'PY' 2>/dev/null
import json, sys
try:
    g = json.load(open(sys.argv[1]))["gpus"]
    print(g[0][sys.argv[2]])
except Exception:
    import torch
    p = torch.cuda.get_device_properties(0)
    print(p.multi_processor_count if sys.argv[2] == "sms" else p.name)
PY
}

# A partition size: the SMs divided by d, down to a multiple of 8, at least 8.
part() { local n=$(( $1 / $2 / 8 * 8 )); [ "$n" -lt 8 ] && n=8; echo "$n"; }

# calib_name SMS GPU_NAME: the device name calib-partitions stored for partition cuda:0/sm=SMS
# (from its JSON: the SMs the driver granted), or "GPU_NAME (SMS SMs)" without it.
calib_name() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["device"]["name"])' "calib-sm$1.json" 2>/dev/null ||
    echo "$2 ($1 SMs)"
}

# has_fit NAME: 0 when calib.db holds RUN_MODEL's chosen step fit for the device NAME, which
# `hetsim real --calib` needs for its --device and for each worker's own device.
has_fit() {
  local n
  [ -f calib.db ] || return 1
  n=$("$H" query --db calib.db sql "SELECT count(*) FROM perf_model p JOIN device d ON d.id = p.device_id
    WHERE d.name = '${1//\'/\'\'}' AND p.model = '$RUN_MODEL' AND p.phase = 'step' AND p.chosen = 1" --csv 2>/dev/null |
    tail -n 1 | tr -d '\r')
  [ "${n:-0}" -ge 1 ] 2>/dev/null
}

# calib_step OUT.json SHARES ARGS...: runs `hetsim calib ARGS... --json >OUT.json` with a
# --time-limit of 1/SHARES of what is left of the step's limit (STEP_DEADLINE, from the runner)
# less 20 s for the exports after it, at least 10 s: calib then stops by itself, keeping what it
# stored, before `timeout` ends the step. Returns calib's exit status, or 75 when it stopped at
# its limit: the step is recorded as partial, and --resume (or `--step NAME`) runs it again,
# calib going on from the points stored.
calib_step() {
  local out=$1 shares=$2 tl=() rc
  shift 2
  if [ -n "${STEP_DEADLINE:-}" ]; then
    local share=$(( (STEP_DEADLINE - $(date +%s) - 20) / shares ))
    [ "$share" -lt 10 ] && share=10
    tl=(--time-limit "${share}s")
  fi
  "$H" calib "$@" ${tl[@]+"${tl[@]}"} --json >"$out" 2>"$out.err"
  rc=$?
  cat "$out.err" >&2
  if [ "$rc" = 1 ] && grep -q "stopped at --time-limit" "$out.err"; then rc=75; fi
  rm -f "$out.err"
  return $rc
}

# worse CUR NEW: the exit status of two calibrations together: a failure (the first one) over
# partial (75) over 0.
worse() {
  if [ "$1" != 0 ] && [ "$1" != 75 ]; then echo "$1"; elif [ "$2" != 0 ]; then echo "$2"; else echo "$1"; fi
}

# The calibration tables as CSV, through hetsim's own query command.
export_calib() {
  local t
  for t in device calib_sample perf_model; do
    "$H" query --db calib.db sql "SELECT * FROM $t" --csv >"calib-$t.csv" || return 1
  done
}

run_tests() { # each gpu test program and script, at most 90 s; 77 is skipped, and so is the step when all are
  local f rc failed=0 passed=0
  for f in "$BUNDLE"/tests/test_gpu_*; do
    [ -x "$f" ] || continue
    echo "=== $(basename "$f")"
    (cd "$BUNDLE" && HETSIM_SOURCE_DIR="$BUNDLE" timeout -k 5 90 "$f"); rc=$?
    echo "=== $(basename "$f"): exit $rc"
    case $rc in 0) passed=$((passed + 1)) ;; 77) ;; *) failed=$((failed + 1)) ;; esac
  done
  for f in "$BUNDLE"/tests/cli_gpu_*.sh; do
    echo "=== $(basename "$f")"
    timeout -k 5 90 bash "$f" "$H" "$BUNDLE"; rc=$?
    echo "=== $(basename "$f"): exit $rc"
    case $rc in 0) passed=$((passed + 1)) ;; 77) ;; *) failed=$((failed + 1)) ;; esac
  done
  echo "tests passed: $passed, failed: $failed, the others skipped"
  [ "$failed" = 0 ] || return 1
  [ "$passed" -gt 0 ] || return 77
}

# machine: what the machine is, for env.txt: the card and driver, the Python packages that the
# bench and profile steps use and that hold the libraries, and what gpu-env.sh chose.
machine() {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "bundle: $(cat "$BUNDLE/VERSION" 2>/dev/null || echo "no VERSION")"
  echo "uname: $(uname -a)"
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  local v
  for v in HETSIM_CUDNN_PATH HETSIM_NCCL_PATH HETSIM_CUBLAS_PATH LD_LIBRARY_PATH; do echo "$v=${!v:-}"; done
  echo "--- nvidia-smi"
  nvidia-smi 2>&1 | head -20
  echo "--- python3"
  python3 - <<'PY' 2>&1
import sys
print(sys.version.replace("\n", " "), sys.executable)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(),
          "available", torch.cuda.is_available())
    if torch.cuda.is_available():
        print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count, "SMs")
        print("nccl", torch.cuda.nccl.version())
except Exception as e:  # the bench and profile steps say the same when they skip
    print("torch: not importable:", e)
from importlib import metadata
for d in ("nvidia-cudnn-cu13", "nvidia-nccl-cu13", "nvidia-cublas", "nvidia-cuda-runtime"):
    try:
        print(d, metadata.version(d))
    except metadata.PackageNotFoundError:
        print(d, "not installed")
PY
  echo "--- ldd hetsim"
  ldd "$H" 2>&1
  echo "--- libcuda on the loader path"
  { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep libcuda
}

step_body() {
  case "$1" in
    doctor)
      local rc
      machine >env.txt 2>&1
      # One run of the probes: the report and cuDNN's device properties together.
      "$H" doctor --json --cudnn-deviceprop cudnn-deviceprop.json >doctor.json 2>doctor.err
      rc=$?
      cat doctor.json doctor.err # why it failed last, for the summary's note
      rm -f doctor.err
      return $rc
      ;;
    deviceless)
      [ -s cudnn-deviceprop.json ] || { echo "no cudnn-deviceprop.json (the doctor step records it)"; return 1; }
      (cd "$BUNDLE" && HETSIM_SOURCE_DIR="$BUNDLE" HETSIM_CUDNN_DEVICEPROP="$OUT/cudnn-deviceprop.json" \
        tests/test_deviceless_cudnn) | tee deviceless.txt
      return "${PIPESTATUS[0]}"
      ;;
    ctest-gpu)
      run_tests 2>&1 | tee ctest-gpu.txt
      return "${PIPESTATUS[0]}"
      ;;
    agreement)
      # Fast math only: ctest-gpu has run test_gpu_nn under strict math (the default) already.
      # (test_gpu_nn sets NVIDIA_TF32_OVERRIDE=0, so fast here means cuDNN's other engines,
      # non-deterministic, FFT and Winograd ones, without TF32.)
      (cd "$BUNDLE" && HETSIM_CUDA_MATH=fast tests/test_gpu_nn) >agreement-fast.txt 2>&1
      local r=$?
      cat agreement-fast.txt
      return $r
      ;;
    bench)
      local m g r rc=0
      : >bench.jsonl
      for m in strict fast; do
        for g in "" --graph; do
          HETSIM_CUDA_MATH=$m "$BUNDLE/bench/bench_gpu_nn" --model resnet18 --batch 256 --steps 50 --warmup 10 $g --json \
            >bench.out
          r=$?
          [ "$r" = 77 ] && { cat bench.out; rm -f bench.out; return 77; } # "no GPU": nothing to time
          cat bench.out >>bench.jsonl
          [ "$r" = 0 ] || rc=1
        done
      done
      rm -f bench.out
      if [ -f "$BUNDLE/bench/torch_resnet18.py" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
        # PyTorch's defaults (hetsim's fast math), eager and as one CUDA graph; then strict math.
        for g in "--math default" "--math default --graph" "--math strict"; do
          # shellcheck disable=SC2086 # $g is two or three words
          python3 "$BUNDLE/bench/torch_resnet18.py" --batch 256 --steps 50 --warmup 10 $g --json >>bench.jsonl || rc=1
        done
      else
        echo "PyTorch with CUDA is not importable here: bench/torch_resnet18.py not run" | tee -a bench-notes.txt
      fi
      cat bench.jsonl
      return $rc
      ;;
    calib-whole)
      # First what the local step needs, in half the time: its model (resnet18), and with it
      # (calib times communication after the models) the local backend's all-reduce over three
      # nets, as the local step's three-worker runs share gradients (validate reads it;
      # real_comm_calib.h).
      # Then the rest of the zoo, compute only. A failure keeps the points stored so far: they
      # are exported too. Partial (75) when either stopped at its share of the time.
      local rc=0
      calib_step calib-whole.json 2 --device cuda:0 --model "$RUN_MODEL" --max-reps 20 --comm-world 3 --db calib.db
      rc=$(worse "$rc" $?)
      if [ -n "$ZOO" ]; then
        calib_step calib-whole-zoo.json 1 --device cuda:0 --model "$ZOO" --max-reps 20 --no-comm --db calib.db
        rc=$(worse "$rc" $?)
      fi
      [ -f calib.db ] && { export_calib || { [ "$rc" = 0 ] && rc=1; }; }
      return $rc
      ;;
    calib-partitions)
      local sms s rc=0
      sms=$(gpu_field sms)
      [ -n "$sms" ] || { echo "no GPU in doctor.json (the doctor step writes it)"; return 1; }
      # The smallest partition also times the local backend's all-reduce over three nets of its
      # size (the local step's three workers on one partition size); three nets of the larger
      # ones do not fit on the GPU together, so those time compute only.
      # resnet18 only (the local step's model: a minute or less a partition does not cover the
      # zoo). Each partition gets an equal share of the time left; one stopped at its share
      # makes the step partial (75), unless one failed.
      local comm shares=3
      for s in $(part "$sms" 8) $(part "$sms" 4) $(part "$sms" 2); do
        comm=(--no-comm)
        [ "$s" = "$(part "$sms" 8)" ] && comm=(--comm-world 3)
        calib_step "calib-sm$s.json" "$shares" --device "cuda:0/sm=$s" --model "$RUN_MODEL" --batches 8,16,32,64,128 \
          --max-reps 20 "${comm[@]}" --db calib.db
        rc=$(worse "$rc" $?)
        shares=$((shares - 1))
      done
      export_calib || { [ "$rc" = 0 ] && rc=1; }
      return $rc
      ;;
    profile)
      local m rc=0
      [ -f "$BUNDLE/tools/hetsim_profile.py" ] || { echo "tools/hetsim_profile.py is not in the bundle: skipped"; return 77; }
      python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
        { echo "PyTorch with CUDA is not importable here: skipped"; return 77; }
      for m in cnn resnet18 mobilenetv2; do
        # Strict math, as calibration computes: the two step times compare like for like (the
        # bench step compares PyTorch's default math with hetsim's fast).
        python3 "$BUNDLE/tools/hetsim_profile.py" --model "$m" --device cuda:0 --batches 8,16,32,64,128,256 \
          --math strict --out "profile-$m.json" || rc=1
      done
      return $rc
      ;;
    local)
      local sms name s1 s2 s3 id rc=0
      sms=$(gpu_field sms)
      name=$(gpu_field name)
      [ -n "$sms" ] || { echo "no GPU in doctor.json (the doctor step writes it)"; return 1; }
      s1=$(part "$sms" 8)
      s2=$(part "$sms" 4)
      s3=$(part "$sms" 2)
      # The calibration (calib-whole, calib-partitions) serves the policy's predictions and
      # validate's simulation. A run given --calib refuses to start without a fit for its
      # --device and for each worker's partition, so a run is given it only when all of those
      # are there (calib-partitions may have been cut short); without it the run times a few
      # steps itself.
      local whole parts_calib=() equal_calib=() calib=()
      [ -f calib.db ] && calib=(--calib calib.db)
      whole=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["device"]["name"])' calib-whole.json 2>/dev/null ||
        echo "$name")
      if has_fit "$whole" && has_fit "$(calib_name "$s1" "$name")" && has_fit "$(calib_name "$s2" "$name")" &&
        has_fit "$(calib_name "$s3" "$name")"; then
        parts_calib=(--calib calib.db)
      else
        echo "calib.db lacks $RUN_MODEL on the whole GPU or on a partition: the partition runs predict from their own steps"
      fi
      if has_fit "$(calib_name "$s1" "$name")"; then
        equal_calib=(--calib calib.db)
      else
        echo "calib.db lacks $RUN_MODEL on $s1 SMs: the equal run predicts from its own steps"
      fi
      # One GPU as a heterogeneous cluster: three workers on partitions of three sizes (7/8 of
      # the SMs together; evaluations on the whole GPU, --device's default cuda:0). Their
      # compute names the partitions' calibrations (calib-partitions), for `hetsim sim` below:
      # the names calib stored (SMs as granted), else the sizes asked.
      cat >local-parts.yaml <<EOF
name: local-parts-$s1-$s2-$s3
network: {bandwidth: 100GB/s, latency: 5us}
device_types:
  small: {compute: {calib: "$(calib_name "$s1" "$name")"}, real_device: "cuda:0/sm=$s1"}
  medium: {compute: {calib: "$(calib_name "$s2" "$name")"}, real_device: "cuda:0/sm=$s2"}
  large: {compute: {calib: "$(calib_name "$s3" "$name")"}, real_device: "cuda:0/sm=$s3"}
nodes:
  - name: gpu0
    devices: [{type: small}, {type: medium}, {type: large}]
EOF
      local common=(--model "$RUN_MODEL" --iterations 40 --eval-every 20 --eval-samples 256 --train-samples 2048
                    --db local.db --json)
      "$H" real --backend local --cluster local-parts.yaml --policy ssgd --global-batch 96 "${common[@]}" \
        ${parts_calib[@]+"${parts_calib[@]}"} >local-parts-ssgd.json || rc=1
      "$H" real --backend local --cluster local-parts.yaml --policy localsgd --global-batch 96 "${common[@]}" \
        ${parts_calib[@]+"${parts_calib[@]}"} >local-parts-localsgd.json || rc=1
      # lbb on the partitions: with calib.db each worker is predicted by its partition's
      # calibration (hs_real_plan_worker_perf), so its batches should follow the partitions' sizes.
      "$H" real --backend local --cluster local-parts.yaml --policy lbb --global-batch 96 "${common[@]}" \
        ${parts_calib[@]+"${parts_calib[@]}"} >local-parts-lbb.json || rc=1
      "$H" query --db local.db sql "SELECT r.id, s.worker, avg(s.batch), avg(s.compute_end_s - s.start_s) FROM step s
        JOIN run r ON r.id = s.run_id WHERE r.policy = 'lbb' AND r.kind = 'real' GROUP BY r.id, s.worker" \
        --csv >local-parts-lbb-batches.csv || rc=1
      "$H" real --backend local --device "cuda:0/sm=$s1" --workers 3 --policy ssgd --global-batch 96 "${common[@]}" \
        ${equal_calib[@]+"${equal_calib[@]}"} >local-equal-ssgd.json || rc=1
      # Each run's partitions and the names their calibrations have, as the runs recorded them.
      "$H" query --db local.db sql "SELECT id, json_extract(options, '\$.type_devices') FROM run WHERE kind = 'real'" \
        --csv >local-type-devices.csv || rc=1
      # validate simulates each type on its partition's calibration (type_calibrations in its
      # JSON) and the links on the local backend's communication as calib-whole and
      # calib-partitions timed it (comm_backend "local" in its JSON); its answers are recorded
      # as they are.
      for id in $("$H" query --db local.db sql "SELECT id FROM run WHERE kind = 'real'" --csv | tail -n +2); do
        id=$(echo "$id" | tr -d '\r')
        "$H" validate "$id" --db local.db ${calib[@]+"${calib[@]}"} --json >"local-validate-$id.json" || rc=1
      done
      # The simulator on the same cluster, each type on its partition's calibration, with the
      # cluster file's own links (validate's are the local backend's, as calibrated).
      if [ ${#parts_calib[@]} -gt 0 ]; then
        "$H" sim --cluster local-parts.yaml --policy ssgd --model "$RUN_MODEL" --global-batch 96 --iterations 40 \
          --calib calib.db --db local.db --json >local-parts-sim-ssgd.json || rc=1
      fi
      cat local-*.json local-type-devices.csv local-parts-lbb-batches.csv 2>/dev/null
      return $rc
      ;;
    nccl)
      local two pids=() r rc=0
      two=$(python3 - doctor.json <<'PY' 2>/dev/null
import json, sys
c = [c for c in json.load(open(sys.argv[1]))["checks"] if c["name"] == "NCCL 2 ranks on 1 GPU"]
print(c[0]["status"] if c else "")
PY
)
      if [ "$two" != ok ]; then
        # One rank then: the whole nccl path of hetsim real (launch, control channel, NCCL's
        # communicator, all-reduce and teardown, the stored run) on the GPU, of world size 1.
        echo "NCCL does not allow two ranks on one GPU here (doctor: ${two:-unknown}; NCCL 2.30+ needed): one rank"
        RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 \
          "$H" real --backend nccl --device cuda:0 --workers 1 --policy ssgd --model "$RUN_MODEL" --global-batch 32 \
          --iterations 30 --eval-every 15 --eval-samples 256 --train-samples 2048 --timeout 60s --db nccl.db --json \
          >nccl-rank0.json 2>nccl-rank0.err || rc=1
        cat nccl-rank0.json nccl-rank0.err
        return $rc
      fi
      for r in 0 1; do
        NCCL_MULTI_RANK_GPU_ENABLE=1 RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 \
          "$H" real --backend nccl --device cuda:0 --workers 2 --policy ssgd --model "$RUN_MODEL" --global-batch 64 \
          --iterations 30 --eval-every 15 --eval-samples 256 --train-samples 2048 --timeout 60s --db nccl.db --json \
          >"nccl-rank$r.json" 2>"nccl-rank$r.err" &
        pids+=($!)
      done
      for r in "${pids[@]}"; do wait "$r" || rc=1; done
      cat nccl-rank*.json nccl-rank*.err
      # Three ranks: two workers, and a third that joins at once. The rounds before it holds
      # the model run on a sub-communicator of the first two; it takes worker 0's replica over
      # NCCL's send/recv; then the world's communicator (real/real_rank.h, "Join events").
      # Short (12 rounds of 16 samples each), so that the step's 90 s hold it on the emulated
      # GPU under ASan with other tests beside it (the first CI run of it took the step to 94 s).
      cat >nccl-join.yaml <<'YAML'
name: nccl-join
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  g: {compute: {t0: 1ms, per_sample: 0.1ms}}
nodes:
  - name: n0
    devices: [{type: g, count: 2}]
events:
  - {at: 0s, join: {type: g, node: n0}}
YAML
      pids=()
      for r in 0 1 2; do
        NCCL_MULTI_RANK_GPU_ENABLE=1 RANK=$r LOCAL_RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=29615 \
          "$H" real --backend nccl --device cuda:0 --cluster nccl-join.yaml --policy ssgd --model "$RUN_MODEL" \
          --global-batch 48 --iterations 12 --eval-every 6 --eval-samples 128 --train-samples 2048 --timeout 60s \
          --db nccl.db --json >"nccl-join-rank$r.json" 2>"nccl-join-rank$r.err" &
        pids+=($!)
      done
      for r in "${pids[@]}"; do wait "$r" || rc=1; done
      cat nccl-join-rank*.json nccl-join-rank*.err
      return $rc
      ;;
  esac
}

if [ -n "$INTERNAL" ]; then
  [ -n "$OUT" ] || die_usage "--internal-step needs --out"
  cd "$OUT" || exit 1
  echo "$$" >.step-sid # the session the runner ends after the step (setsid: this shell leads it)
  # The cli_gpu_*.sh tests read rows with the sqlite3 shell; a GPU machine may not have it.
  if ! command -v sqlite3 >/dev/null && command -v python3 >/dev/null; then
    mkdir -p "$OUT/.shim"
    cat >"$OUT/.shim/sqlite3" <<'SH'
#!/usr/bin/env python3
# gpu-check.sh's stand-in for the sqlite3 shell: `sqlite3 DB SQL` in list mode ("a|b").
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
for row in con.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in row))
SH
    chmod +x "$OUT/.shim/sqlite3"
    export PATH="$OUT/.shim:$PATH"
  fi
  step_body "$INTERNAL"
  exit $?
fi

# --- the run ---------------------------------------------------------------------------------

[ -x "$H" ] || { echo "gpu-check.sh: $H is missing or not executable" >&2; exit 2; }
command -v timeout >/dev/null || { echo "gpu-check.sh: needs timeout (coreutils)" >&2; exit 2; }
if [ -z "$OUT" ]; then
  if [ -z "$CARD" ]; then
    name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -1)
    [ -n "$name" ] || name=$("$H" doctor --json 2>/dev/null | python3 -c 'import json,sys; g=json.load(sys.stdin)["gpus"]; print(g[0]["name"] if g else "")' 2>/dev/null)
    # "NVIDIA H100 80GB HBM3" -> "h100-80gb-hbm3"
    CARD=$(echo "${name:-unknown}" | tr 'A-Z' 'a-z' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\{1,\}/-/g' -e 's/^-//' -e 's/-$//')
  fi
  OUT="${ROOT:-$BUNDLE}/notebooks-data/gpu-$CARD"
fi
mkdir -p "$OUT/logs" || exit 2
OUT=$(cd "$OUT" && pwd)
SUMMARY="$OUT/summary.tsv"
if [ -n "$PACK" ]; then
  mkdir -p "$(dirname "$PACK")" || exit 2
  PACK="$(cd "$(dirname "$PACK")" && pwd)/$(basename "$PACK")"
  case "$PACK/" in "$OUT"/*) die_usage "--pack $PACK is inside the results folder $OUT" ;; esac
fi
if [ "$RESUME" = 1 ] && [ ! -f "$SUMMARY" ]; then
  echo "gpu-check.sh: --resume: no $SUMMARY yet, so every selected step runs" >&2
fi
[ -f "$SUMMARY" ] || printf 'step\tstatus\texit\tseconds\tnote\n' >"$SUMMARY"
echo "results: $OUT (budget ${BUDGET}s${STEP_LIMIT:+, at most ${STEP_LIMIT}s a step})"

# done_before STEP: the summary's last row for STEP says it ran to an end, or skipped for a
# reason other than time (--resume leaves it out; a partial calibration it runs again).
done_before() {
  awk -F'\t' -v s="$1" 'NR > 1 && $1 == s {st = $2; note = $5}
    END {exit !(st != "" && st != "partial" && !(st == "skipped" && note ~ /^out of time/))}' "$SUMMARY"
}

# pack: the results folder as one .tar.gz (--pack), written beside and then moved into place.
pack() {
  [ -n "$PACK" ] || return 0
  tar -C "$(dirname "$OUT")" --exclude=.shim --exclude=.step-sid -czf "$PACK.part" "$(basename "$OUT")" && mv -f "$PACK.part" "$PACK" ||
    echo "gpu-check.sh: could not write $PACK" >&2
}

# Each step in a session of its own where setsid is at hand (util-linux), so that nothing it
# started outlives it.
SETSID=()
command -v setsid >/dev/null && SETSID=(setsid)
start=$(date +%s)
worst=0
while read -r s; do
  if [ "$RESUME" = 1 ] && done_before "$s"; then
    echo "step $s: done before (summary.tsv), not run again"
    continue
  fi
  now=$(date +%s)
  left=$((BUDGET - (now - start)))
  limit=${STEP_LIMIT:-$(limit "$s")}
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 30 ]; then
    printf '%s\tskipped\t-\t0\tout of time: the run'"'"'s budget of %ss is spent\n' "$s" "$BUDGET" >>"$SUMMARY"
    echo "step $s: skipped (out of time)"
    continue
  fi
  echo "step $s (at most ${limit}s) ..."
  t0=$(date +%s)
  rm -f "$OUT/.step-sid"
  STEP_DEADLINE=$(( $(date +%s) + limit )) \
    timeout -k 15 "$limit" ${SETSID[@]+"${SETSID[@]}"} bash "$0" --internal-step "$s" --bundle "$BUNDLE" --out "$OUT" --models "$MODELS" \
    >"$OUT/logs/$s.log" 2>&1 </dev/null # (the loop's own input is the list of steps)
  rc=$?
  # Whatever the step left running ends with it: the forked ranks of a test, an inner
  # `timeout`'s own process group, which the step's timeout does not reach. The step ran in a
  # session of its own (setsid), led by the shell that wrote .step-sid.
  # SIGTERM first (calib stops cleanly on it, keeping what it measured), SIGKILL after 10 s.
  if [ ${#SETSID[@]} -gt 0 ] && [ -s "$OUT/.step-sid" ]; then
    sid=$(cat "$OUT/.step-sid")
    if pkill -TERM -s "$sid" 2>/dev/null; then
      for _ in $(seq 20); do pgrep -s "$sid" >/dev/null || break; sleep 0.5; done
      pkill -KILL -s "$sid" 2>/dev/null
    elif ! command -v pkill >/dev/null; then
      kill -TERM -- "-$sid" 2>/dev/null && sleep 2 && kill -KILL -- "-$sid" 2>/dev/null
    fi
  fi
  rm -f "$OUT/.step-sid"
  secs=$(( $(date +%s) - t0 ))
  case $rc in
    0) status=ok ;;
    77) status=skipped ;;
    75) status=partial ;;
    124 | 137) status=timeout ;;
    *) status=failed ;;
  esac
  note=""
  if [ "$status" != ok ]; then
    note=$(grep -v '^[[:space:]]*$' "$OUT/logs/$s.log" | tail -1 | tr '\t' ' ' | cut -c1-300)
    [ "$status" = timeout ] && note="stopped after ${limit}s; last output: $note"
    [ "$status" = partial ] && note="stopped at its time limit, what it measured stored (--resume goes on); $note"
  fi
  case $status in timeout | failed | partial) worst=1 ;; esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$status" "$rc" "$secs" "$note" >>"$SUMMARY"
  echo "step $s: $status in ${secs}s${note:+ ($note)}"
  pack
done < <(selected)
pack
echo "summary: $SUMMARY${PACK:+ (packed: $PACK)}"
exit $worst
