#!/usr/bin/env bash
# hetsim calib under a launcher (real/real_comm_calib.h, hs_real_comm_calibrate_ranks): every
# process of a torchrun-style launch on localhost times the multi-process channel together and
# rank 0 stores it as backend tcp: the all-reduce at the launch's world size, rank 1's send to
# rank 0 and one control message, at 4 KiB x 4^k and each model's gradient; a rerun resumes,
# --redo times again; what only the steps take, a GPU, one process and ranks given other message
# sizes than rank 0 are refused (exit 2, nothing stored); a rank that dies or never comes fails
# rank 0 in bounded time, naming it.
# usage: cli_calib_ranks.sh HETSIM_BINARY SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP
DB="$T/c.db"
cd "$T"

# Two fresh ports per launch (the channel's star takes MASTER_PORT) from a block of this script's.
port=$(first_port 1) # cli-lib.sh; the script takes fewer than 128 ports
quick=(--device cpu --model mlp --comm-max 64KiB --warmup 1 --min-reps 3 --max-reps 6 --db "$DB")

# Starts WORLD torchrun-style ranks of `hetsim calib ARGS...` on fresh ports (ranks, cli-lib.sh:
# $T/out.r, $T/err.r, $T/rc.r).
launch() {
  local world=$1; shift
  port=$((port + 2))
  ranks "$world" "$port" calib "$@"
}

# --- two processes: the channel timed and stored by rank 0 -------------------------------------
launch 2 "${quick[@]}" --json
check two_ranks_exit test "$(cat "$T/rc.0") $(cat "$T/rc.1")" = "0 0" || head -c 600 "$T/err.0" "$T/err.1"
check rank1_silent test ! -s "$T/out.1"
check json_launch python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "complete" and r["launch"] == {"source": "torchrun", "world": 2}, r["launch"]
assert r["models"] == []
c = {(x["backend"], x["op"], x["world_size"]): x for x in r["comm"]}
assert set(c) == {("tcp", "allreduce", 2), ("tcp", "p2p", 2)}, c
for x in c.values():
    assert x["measured"] == 4 and x["skipped"] == 0 and x["alpha_s"] >= 0 and x["beta_bytes_per_s"] > 0, x
assert r["wake"]["measured"] == 1 and 0 < r["wake"]["median_s"] < 0.01, r["wake"]
assert "2 processes started by torchrun" in r["comm_note"]' "$T/out.0" || head -c 800 "$T/out.0"
# 4 KiB, 16 KiB, 64 KiB (--comm-max) and mlp's gradient (814,120 bytes), for both operations.
check sizes test "$(q "SELECT group_concat(bytes) FROM (SELECT bytes FROM comm_sample WHERE backend = 'tcp'
    AND op = 'allreduce' AND world_size = 2 ORDER BY bytes)")" = "4096,16384,65536,814120"
check p2p_sizes test "$(q "SELECT count(*) FROM comm_sample WHERE backend = 'tcp' AND op = 'p2p' AND world_size = 2")" = 4
check wake_row test "$(q "SELECT count(*) FROM comm_sample WHERE backend = 'tcp' AND op = 'wake' AND bytes = 0
    AND median_s > 0 AND count >= 3")" = 1
check models test "$(q "SELECT count(*) FROM comm_model WHERE backend = 'tcp'")" = 2
check one_device test "$(q "SELECT count(*) FROM device")" = 1
check no_steps test "$(q "SELECT (SELECT count(*) FROM calib_sample) + (SELECT count(*) FROM comm_sample WHERE backend <> 'tcp')")" = 0
# Larger messages take longer: the all-reduce of the gradient against that of 4 KiB.
check grows test "$(q "SELECT (SELECT median_s FROM comm_sample WHERE backend = 'tcp' AND op = 'allreduce' AND bytes = 814120) >
    (SELECT median_s FROM comm_sample WHERE backend = 'tcp' AND op = 'allreduce' AND bytes = 4096)")" = 1

# --- the simulator takes the channel where a cluster file asks for it ---------------------------
# `network: {calib: NAME, backend: tcp}` takes the tcp all-reduce of the cluster's 2 workers; a
# backend the device has no measurement of is refused, naming it (exit 2).
name=$(q "SELECT name FROM device")
chan() { # FILE BACKEND
  cat >"$1" <<YAML
name: chan
network: {calib: "$name", backend: $2}
device_types:
  c: {compute: {t0: 1ms, per_sample: 0.01ms}}
nodes:
  - {name: n0, link: {calib: "$name", backend: $2}, devices: [{type: c, count: 2}]}
YAML
}
chan "$T/tcp.yaml" tcp
"$H" sim --cluster "$T/tcp.yaml" --calib "$DB" --db "$T/sim.db" --model mlp --policy ssgd --global-batch 64 --iterations 5 --json \
  >"$T/sim.json" 2>"$T/sim.err"
check sim_tcp_link python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
links = r["calib_links"]
assert len(links) == 2 and all(l["measurement"].startswith("tcp allreduce, world size 2") for l in links), links' \
  "$T/sim.json" || head -c 600 "$T/sim.err" "$T/sim.json"
chan "$T/cpu.yaml" cpu
"$H" sim --cluster "$T/cpu.yaml" --calib "$DB" --db "$T/sim.db" --model mlp --policy ssgd --global-batch 64 --iterations 5 \
  >"$T/sim.out" 2>"$T/sim.err"
check sim_other_backend_exit test $? = 2
check sim_other_backend_says grep -q "cpu.yaml:2:.*network.calib: no measured communication (comm_model, op p2p or allreduce, backend cpu)" \
  "$T/sim.err" || head -c 600 "$T/sim.err"

# --- a rerun resumes (nothing timed again); --redo times everything again ------------------------
launch 2 "${quick[@]}"
check resume_exit test "$(cat "$T/rc.0") $(cat "$T/rc.1")" = "0 0" || head -c 600 "$T/err.0"
check resume_text grep -q "comm tcp allreduce (world 2): .*(0 sizes timed, 4 stored)" "$T/out.0" || cat "$T/out.0"
check resume_wake grep -q "tcp hand-off (one message between processes, wake): already stored" "$T/out.0"
check resume_rows test "$(q "SELECT count(*) FROM comm_sample")" = 9
q "UPDATE comm_sample SET count = 9999" # a mark that no timing leaves
launch 2 "${quick[@]}" --redo
check redo_exit test "$(cat "$T/rc.0") $(cat "$T/rc.1")" = "0 0" || head -c 600 "$T/err.0"
check redo_rows test "$(q "SELECT count(*) || ' ' || sum(count = 9999) FROM comm_sample")" = "9 0"
# (Failed once, in a fresh-clone CI of 2026-11-29 under the suite's load, and not again in 10
# reruns under load: on failure the models and rank 0's output say which fit is missing.)
check redo_models test "$(q "SELECT count(*) FROM comm_model")" = 2 ||
  { q "SELECT backend, op, world_size, alpha_s, beta_bytes_per_s FROM comm_model"; cat "$T/out.0"; }

# --- three processes: the all-reduce of world 3 joins; p2p and the message are stored already -----
launch 3 "${quick[@]}" --model mlp
check three_exit test "$(cat "$T/rc.0") $(cat "$T/rc.1") $(cat "$T/rc.2")" = "0 0 0" || head -c 600 "$T/err.0"
check three_rows test "$(q "SELECT count(*) FROM comm_sample WHERE backend = 'tcp' AND op = 'allreduce' AND world_size = 3")" = 4
check three_text grep -q "comm tcp p2p (world 2): .*(0 sizes timed, 4 stored)" "$T/out.0"

# --- under mpirun (when installed): the same, its launch said so ----------------------------------
if command -v mpirun >/dev/null 2>&1; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  port=$((port + 2))
  timeout 120 mpirun --oversubscribe -np 2 -x MASTER_PORT=$port "$H" calib "${quick[@]}" --db "$T/mpi.db" --json \
    >"$T/out.mpi" 2>"$T/err.mpi"
  check mpirun_exit test $? = 0 || head -c 600 "$T/err.mpi"
  check mpirun_launch python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["launch"] == {"source": "mpirun", "world": 2}, r["launch"]' "$T/out.mpi" || head -c 600 "$T/out.mpi"
  check mpirun_rows test "$(sqlite3 "$T/mpi.db" "SELECT count(*) FROM comm_sample WHERE backend = 'tcp'")" = 9
else
  echo "skip: mpirun is not installed (its checks)"
fi

# --- refused before anything is stored (exit 2) ---------------------------------------------------
refused() { # NAME PATTERN WORLD ARGS...
  local name=$1 pat=$2 world=$3; shift 3
  rm -f "$T/bad.db"
  RANK=0 WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 30 "$H" calib "$@" --db "$T/bad.db" \
    >"$T/out.bad" 2>"$T/err.bad"
  local rc=$?
  check "${name}_exit" test "$rc" = 2 || head -c 400 "$T/err.bad"
  check "${name}_says" grep -q -- "$pat" "$T/err.bad" || head -c 400 "$T/err.bad"
  check "${name}_nothing" test ! -e "$T/bad.db"
}
refused gpu "under torchrun, hetsim calib times the channel of one process per worker on the cpu" 2 --device cuda:0
refused concurrent "\-\-concurrent: under torchrun, hetsim calib times only the channel" 2 --device cpu --concurrent 2
refused comm_world "\-\-comm-world: under torchrun" 2 --device cpu --comm-world 3
refused one_process "under torchrun with one process there is no channel to time" 1 --device cpu
rm -f "$T/bad.db"
RANK=5 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 30 "$H" calib --device cpu --db "$T/bad.db" \
  >"$T/out.bad" 2>"$T/err.bad"
check bad_env_exit test $? = 2
check bad_env_nothing test ! -e "$T/bad.db"

# --- ranks given other message sizes (--model, --comm-max) than rank 0 fail together, before -----
# anything is stored: rank 0 names the rank and both largest messages (exit 2).
port=$((port + 2))
rm -f "$T/mixed.db"
for r in 0 1; do
  m=mlp; [ $r = 1 ] && m=cnn
  (RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$H" calib --device cpu --model $m \
     --db "$T/mixed.db" >"$T/out.$r" 2>"$T/err.$r"; echo $? >"$T/rc.$r") &
done
wait
check mixed_exit test "$(cat "$T/rc.0") $(cat "$T/rc.1")" = "2 1" || head -c 600 "$T/err.0" "$T/err.1"
check mixed_says grep -q "rank 1 was started with other message sizes than rank 0 (its largest 246824 bytes, rank 0's \
814120): start every rank with the same --model and --comm-max$" "$T/err.0" || head -c 400 "$T/err.0"
check mixed_rank1_says grep -q "rank 1: its message sizes (its --model and --comm-max) differ from rank 0's" "$T/err.1"
check mixed_nothing test "$(sqlite3 "$T/mixed.db" "SELECT (SELECT count(*) FROM device) + (SELECT count(*) FROM comm_sample)")" = 0

# --- a rank that never comes, or dies mid-way, fails rank 0 in bounded time -----------------------
port=$((port + 2))
start=$SECONDS
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$H" calib "${quick[@]}" --time-limit 3s \
  >"$T/out.alone" 2>"$T/err.alone"
check alone_exit test $? = 1
check alone_bounded test $((SECONDS - start)) -lt 20
check alone_says grep -q "rank" "$T/err.alone" || head -c 400 "$T/err.alone"

port=$((port + 2))
rm -f "$T/kill.db"
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$H" calib --device cpu --model mlp \
  --min-reps 100000 --max-reps 100000 --db "$T/kill.db" >/dev/null 2>&1 &
victim=$!
disown "$victim" # its death by kill -9 is the point: no "Killed" line from this shell
kill_at_exit+=("$victim")
(sleep 1.5; kill -9 "$victim" 2>/dev/null) &
start=$SECONDS
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$H" calib --device cpu --model mlp \
  --min-reps 100000 --max-reps 100000 --db "$T/kill.db" >"$T/out.kill" 2>"$T/err.kill"
check killed_exit test $? = 1 || head -c 400 "$T/err.kill"
check killed_bounded test $((SECONDS - start)) -lt 30
check killed_names_rank grep -q "rank 1" "$T/err.kill" || head -c 400 "$T/err.kill"
check killed_kept grep -q "the points stored so far are kept" "$T/err.kill"
wait

# Every port taken lies in the script's block of 128 (first_port).
check ports_in_block test $((port + 1 - $(first_port 1))) -lt 128

cli_finish
