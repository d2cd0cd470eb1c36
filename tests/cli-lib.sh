# The harness that the tests/cli_*.sh scripts share; each sources it from its own folder:
#   . "$(dirname "$0")/cli-lib.sh"
#   cli_setup "$@"
# and ends with cli_finish. Not named cli_*.sh: CMakeLists.txt and tests/valgrind.sh run every
# tests/cli_*.sh as a test of its own.
#
# Output: one "ok   NAME" or "FAIL NAME[: REASON]" line per check, then "N passed, M failed";
# exit status 0 when all passed, 1 when any failed, 77 when a script skips.

# cli_setup "$@": HETSIM and SRC from the arguments (HETSIM SOURCE_DIR), a fresh folder TMP that
# is removed at exit, the counters at zero and the settings below at their defaults.
cli_setup() {
  local me
  me=$(basename "$0")
  HETSIM=${1:?usage: $me HETSIM SOURCE_DIR}
  SRC=${2:?usage: $me HETSIM SOURCE_DIR}
  me=${me%.sh}
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/hetsim-${me//_/-}.XXXXXX")   # hetsim-cli-NAME.XXXXXX
  kill_at_exit=()   # background processes to kill -9 at exit (those a failed run left behind)
  trap cli_cleanup EXIT
  pass=0
  fail=0
  CHECK_PREFIX=""   # put before every check name ("query." gives "ok   query.NAME")
  CHECK_TERSE=0     # 1: a failed `check` prints its name alone, not the command that failed
  RUN_ERR_BYTES=300 # how much of the stderr a failed `run` shows
}

# cli_cleanup: what the exit trap does; a script that must undo more calls it from its own trap.
# HETSIM_KEEP_TMP=1 keeps TMP (its path on stderr) to look at after a failure.
cli_cleanup() {
  local p
  for p in ${kill_at_exit[@]+"${kill_at_exit[@]}"}; do kill -9 "$p" 2>/dev/null; done
  if [ -n "${HETSIM_KEEP_TMP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}

# cli_summary prints the "N passed, M failed" line; cli_finish prints it and exits 0 when every
# check passed, 1 otherwise.
cli_summary() { echo "$pass passed, $fail failed"; }
cli_finish() {
  cli_summary
  [ "$fail" -eq 0 ] && exit 0
  exit 1
}

# torch_python_or_skip: PY, the Python that runs the PyTorch scripts (HETSIM_TORCH_PYTHON, else
# /usr/bin/python3, which has Debian's python3-torch); the script skips (77) where PY cannot
# import torch (the Makefile's TEST_DEB_PACKAGES install it, so CI never skips).
torch_python_or_skip() {
  PY=${HETSIM_TORCH_PYTHON:-/usr/bin/python3}
  if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "skip: $PY cannot import torch (Debian: apt-get install python3-torch python3-torchvision)"
    exit 77
  fi
}

# ok NAME; bad NAME [REASON]
ok() { pass=$((pass + 1)); echo "ok   $CHECK_PREFIX$1"; }
bad() {
  fail=$((fail + 1))
  if [ $# -ge 2 ]; then echo "FAIL $CHECK_PREFIX$1: $2"; else echo "FAIL $CHECK_PREFIX$1"; fi
}

# check NAME COMMAND...: passes when COMMAND succeeds. Returns 1 on a failure, so that
# `check ... || show_what_went_wrong` works.
check() {
  local name=$1
  shift
  if "$@"; then
    ok "$name"
  elif [ "$CHECK_TERSE" = 1 ]; then
    bad "$name"
    return 1
  else
    bad "$name" "condition failed: $*"
    return 1
  fi
}

# expect_exit NAME CODE COMMAND...: a check that COMMAND exits with CODE; its stdout and stderr
# are left in $TMP/out and $TMP/err.
expect_exit() {
  local name=$1 code=$2
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ "$rc" = "$code" ]; then ok "$name"; else bad "$name (exit $rc, wanted $code): $(head -c 300 "$TMP/err")"; fi
}

# run NAME EXPECTED_STATUS ARGS...: runs `$HETSIM ARGS...`, keeping its stdout and stderr in
# $TMP/out and $TMP/err. Counts a failure (and returns 1) when the exit status is not the one
# expected; a success is not counted: the checks that follow (run ... && check ...) are.
run() {
  local name=$1 want=$2
  shift 2
  "$HETSIM" "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    bad "$name" "exit $got, expected $want; stderr: $(head -c "$RUN_ERR_BYTES" "$TMP/err")"
    return 1
  fi
  return 0
}

# has out|err TEXT: the last run's stdout or stderr contains TEXT.
has() { grep -qF -- "$2" "$TMP/$1"; }

# q SQL: sqlite3 on $DB (list mode: "a|b").
q() { sqlite3 "$DB" "$1"; }
# rows DB SQL: the result rows of `hetsim query ... --csv sql`, without the header and the CRs.
rows() { "$HETSIM" query --db "$1" --csv sql "$2" | tail -n +2 | tr -d '\r'; }
# val DB SQL: the last line of that CSV (a single value; the header when there is no row).
val() { "$HETSIM" query --db "$1" sql "$2" --csv | tr -d '\r' | tail -n 1; }

# fashion_mnist_or_synthetic: mlp and cnn train on Fashion-MNIST where its files are installed
# (in $HETSIM_FASHION_MNIST_DIR, or else /usr/share/datasets/fashion-mnist); elsewhere this
# exports HETSIM_FASHION_MNIST_DIR=synthetic, so that they train on the synthetic stand-in of the
# same shape (docs/data.md) and the real path runs all the same: a test run never skips it. Sets
# FMNIST to "real" or "synthetic"; a check that holds only on the real data (an accuracy
# figure) runs only where FMNIST is real.
fashion_mnist_or_synthetic() {
  local dir=${HETSIM_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
  if [ "$dir" != synthetic ] && { [ -r "$dir/train-images-idx3-ubyte.gz" ] || [ -r "$dir/train-images-idx3-ubyte" ]; }; then
    FMNIST=real
    return
  fi
  [ "$dir" = synthetic ] ||
    echo "Fashion-MNIST is not installed in $dir: mlp and cnn train on its synthetic stand-in (HETSIM_FASHION_MNIST_DIR=synthetic)"
  export HETSIM_FASHION_MNIST_DIR=synthetic
  FMNIST=synthetic
}

# first_port SLOT: the first of the 128 loopback ports a script that starts ranks takes (two per
# launch: MASTER_PORT and the control channel's next one), from its PID and its SLOT (0, 1, 2:
# cli_real_ranks, cli_calib_ranks, cli_gpu_ranks), all in 20000-32287: below the kernel's
# ephemeral ports (32768-60999 here, /proc/sys/net/ipv4/ip_local_port_range). There the ranks'
# own connections take their local ports, and one closed a moment ago (TIME_WAIT) makes rank 0's
# bind on it fail ("Address already in use"): a listening port chosen in that range failed a
# launch now and then.
first_port() { echo $((20000 + $1 * 4096 + ($$ % 32) * 128)); }

# ranks WORLD PORT ARGS...: starts WORLD torchrun-style processes (RANK, WORLD_SIZE, MASTER_ADDR
# 127.0.0.1, MASTER_PORT PORT) of `$HETSIM ARGS...`, each bounded by 120 s; rank r writes
# $TMP/out.r, $TMP/err.r and its exit status to $TMP/rc.r. Waits for them all.
ranks() {
  local world=$1 port=$2 r ps=()
  shift 2
  for r in $(seq 0 $((world - 1))); do
    (RANK=$r WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$HETSIM" "$@" \
       >"$TMP/out.$r" 2>"$TMP/err.$r"; echo $? >"$TMP/rc.$r") &
    ps+=($!)
  done
  wait "${ps[@]}"
}

# ends_within_60s NAME PID: a check that background process PID ends by itself within 60 s (it
# is killed after that); then waits for it and returns its exit status.
ends_within_60s() {
  local name=$1 pid=$2 ended=0
  for _ in $(seq 1 600); do
    if ! kill -0 "$pid" 2>/dev/null; then ended=1; break; fi
    sleep 0.1
  done
  check "$name" test $ended = 1
  [ $ended = 1 ] || kill -9 "$pid" 2>/dev/null
  wait "$pid"
}

# slow_cluster FILE [FACTOR]: writes a cluster of two cpu workers in which worker 1 is FACTOR
# (default 3.0) times slower from the start (slowdown emulation).
slow_cluster() { events_cluster "$1" slow 2 "{at: 0s, worker: 1, slowdown: ${2:-3.0}}"; }

# events_cluster FILE NAME COUNT EVENT...: writes the cluster NAME of COUNT cpu workers on one
# node with the given events (flow mappings, one per line).
events_cluster() {
  local f=$1 name=$2 count=$3 e
  shift 3
  cat >"$f" <<YAML
name: $name
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  c: {compute: {t0: 1ms, per_sample: 0.1ms}}
nodes:
  - name: n0
    link: {bandwidth: 8GB/s, latency: 5us}
    devices: [{type: c, count: $count}]
events:
YAML
  for e in "$@"; do echo "  - $e" >>"$f"; done
}

# took_the_model RUN: 1 when worker 2 of RUN, a joiner, first computed on a model at least as new
# as every all-reduce that worker 0 saw end before the join.
took_the_model() {
  q "SELECT (SELECT min(model_version) FROM step WHERE run_id = $1 AND worker = 2) >= coalesce((SELECT 1 +
     max(model_version) FROM step WHERE run_id = $1 AND worker = 0 AND comm_end_s < (SELECT joined_at_s FROM worker
     WHERE run_id = $1 AND idx = 2)), 0)"
}

# late_loss RUN: an SQL expression, the upper median of RUN's evaluated losses in the second half
# of its steps. Where training ends is checked on it rather than on the last evaluation: an
# asynchronous policy's evaluations jump with the timing of real threads (asp once ended at
# 1.98 after 0.89 in CI's sanitizer job, 2026-11-28), and one jump must not decide.
late_loss() {
  echo "(SELECT loss FROM eval WHERE run_id = $1 AND 2 * step > (SELECT max(step) FROM eval WHERE run_id = $1)
    ORDER BY loss LIMIT 1 OFFSET (SELECT count(*) / 2 FROM eval WHERE run_id = $1
    AND 2 * step > (SELECT max(step) FROM eval WHERE run_id = $1)))"
}

# median_compute RUN WORKER: an SQL expression, the median compute time of WORKER's steps in RUN
# after the first. Medians compare where a mean is at the mercy of one preemption on a loaded
# machine.
median_compute() {
  echo "(SELECT compute_end_s - start_s AS t FROM step WHERE run_id = $1 AND worker = $2 AND step > 0
    ORDER BY t LIMIT 1 OFFSET (SELECT count(*) / 2 FROM step WHERE run_id = $1 AND worker = $2 AND step > 0))"
}
