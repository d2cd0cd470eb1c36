#!/usr/bin/env bash
# hetsim real on the nccl backend in multi-process mode (real/real_rank.h over
# real/real_nccl.c): two torchrun-style ranks train mlp under ssgd and localsgd (ncclAllReduce),
# the loss falls and rank 0 stores complete rows; a bad device index exits 2; a rank that fails
# before its run tells rank 0, which ends at once; a rank killed
# mid-run ends the other within 60 s and the run is marked failed.
# Two ranks take two GPUs (--device cuda:local), or share GPU 0 where NCCL allows it (2.30+ with
# NCCL_MULTI_RANK_GPU_ENABLE=1). Needs a GPU and NCCL: exits 77 (skipped) without them (mlp
# trains on the synthetic stand-in where Fashion-MNIST is not installed). Not run on a GPU yet.
# usage: cli_gpu_ranks.sh HETSIM_BINARY SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP # the short names this script uses
DB="$T/r.db"
cd "$T"
fashion_mnist_or_synthetic
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -lt 1 ]; then
  echo "no GPU (nvidia-smi lists none); skipping"
  exit 77
fi
if [ "$gpus" -ge 2 ]; then
  device=cuda:local
else
  device=cuda:0
  export NCCL_MULTI_RANK_GPU_ENABLE=1
fi

port=$(first_port 2) # cli-lib.sh; the script takes fewer than 128 ports
next_port() { port=$((port + 2)); }
# Two ranks of `hetsim real ARGS...`; rank r writes out.r, err.r, rc.r.
two_ranks() {
  next_port
  local r ps=()
  for r in 0 1; do
    (RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout --foreground 300 "$H" real "$@" \
       >"$T/out.$r" 2>"$T/err.$r"; echo $? >"$T/rc.$r") &
    ps+=($!)
  done
  wait "${ps[@]}"
}

common=(--model mlp --global-batch 64 --workers 2 --train-samples 2000 --eval-samples 500 --eval-every 10
        --iterations 40 --backend nccl --device "$device" --db "$T/r.db")
two_ranks --policy ssgd "${common[@]}" --json
# Skipped only for what this machine lacks (a GPU, CUDA, NCCL) or an NCCL that refuses two ranks
# on one GPU, not for any message that mentions NCCL: NCCL's error strings all do ("run with
# NCCL_DEBUG=WARN for details"), so a real failure of the backend would pass for a skip.
skip_pat="no usable GPU\|no CUDA\|libnccl\|Duplicate GPU\|multi-rank\|same GPU"
[ "$gpus" -ge 2 ] || skip_pat="$skip_pat\|invalid usage"
if [ "$(cat "$T/rc.0")" != 0 ] && grep -q "$skip_pat" "$T/err.0" "$T/err.1"; then
  echo "skipped: $(head -c 400 "$T/err.0") $(head -c 400 "$T/err.1")"
  exit 77
fi
for p in ssgd localsgd; do
  [ $p = ssgd ] || two_ranks --policy $p "${common[@]}" --json
  check "nccl_${p}_exit" test "$(cat "$T/rc.0") $(cat "$T/rc.1")" = "0 0" || head -c 600 "$T/err.0" "$T/err.1"
  id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out.0")
  if [ -z "$id" ]; then bad "nccl_${p}_json"; continue; fi
  check "nccl_${p}_complete" test "$(q "SELECT kind || ' ' || status FROM run WHERE id = $id")" = "real complete"
  check "nccl_${p}_iterations" test "$(q "SELECT iterations FROM summary WHERE run_id = $id")" = 40
  check "nccl_${p}_workers" test "$(q "SELECT count(*) FROM worker WHERE run_id = $id AND steps > 0")" = 2
  check "nccl_${p}_names" test "$(q "SELECT cluster_name || ' ' || (SELECT group_concat(DISTINCT device_type) FROM worker
      WHERE run_id = $id) FROM run WHERE id = $id")" = "cuda-ranks cuda"
  check "nccl_${p}_step_fits" test "$(python3 -c 'import json, sys
print(len([f for f in json.load(open(sys.argv[1]))["step_fits"] if f["t0_s"] is not None]))' "$T/out.0")" = 2
  check "nccl_${p}_loss_falls" test "$(q "SELECT (SELECT loss FROM eval WHERE run_id = $id ORDER BY step DESC LIMIT 1)
      < 0.75 * ln(10)")" = 1
done

# A bad device index: exit 2 with a clear message on every rank, nothing stored.
before=$(q "SELECT count(*) FROM run")
two_ranks --policy ssgd "${common[@]}" --device cuda:99
check nccl_bad_device_exit test "$(cat "$T/rc.0") $(cat "$T/rc.1")" = "2 2"
check nccl_bad_device_says grep -q "bad device index" "$T/err.0"
check nccl_bad_device_stores_nothing test "$(q "SELECT count(*) FROM run")" = "$before"

# Rank 1 fails before its run (its --calib is missing): it tells rank 0, which fails the run with
# that message at once (NCCL's bootstrap, waiting for rank 1, is cancelled), not after --timeout.
next_port
start=$SECONDS
for r in 0 1; do
  extra=()
  [ $r = 1 ] && extra=(--calib "$T/missing.db")
  (RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout --foreground 300 "$H" real \
     --policy ssgd "${common[@]}" --timeout 60s ${extra[@]+"${extra[@]}"} >"$T/out.$r" 2>"$T/err.$r"; echo $? >"$T/rc.$r") &
done
wait
check nccl_rank_failure_exits test "$(cat "$T/rc.0") $(cat "$T/rc.1")" = "1 2" || head -c 600 "$T/err.0" "$T/err.1"
check nccl_rank_failure_told grep -q "failed: rank 1: --calib $T/missing.db" "$T/err.0"
check nccl_rank_failure_within_30s test $((SECONDS - start)) -lt 30

# Rank 1 killed mid-run: rank 0 ends by itself within 60 s, the run is failed, rows stay.
next_port
kargs=(--policy ssgd --model mlp --global-batch 64 --workers 2 --train-samples 2000 --eval-samples 500
       --eval-every 50 --iterations 100000000 --timeout 30s --backend nccl --device "$device" --db "$T/k.db")
RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$H" real "${kargs[@]}" >"$T/out.k1" 2>"$T/err.k1" &
k1=$!
kill_at_exit+=($k1)
RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$H" real "${kargs[@]}" >"$T/out.k0" 2>"$T/err.k0" &
k0=$!
kill_at_exit+=($k0)
for _ in $(seq 1 600); do
  [ "$(sqlite3 "$T/k.db" "SELECT count(*) FROM run" 2>/dev/null)" = 1 ] && break
  sleep 0.1
done
sleep 2
kill -9 $k1
ends_within_60s nccl_killed_rank0_ends_within_60s $k0
check nccl_killed_exit test $? = 1
check nccl_killed_says grep -q "rank 1" "$T/err.k0"
check nccl_killed_marked test "$(sqlite3 "$T/k.db" "SELECT status FROM run")" = failed
check nccl_killed_keeps_rows test "$(sqlite3 "$T/k.db" "SELECT count(*) > 0 FROM step")" = 1

# Every port taken lies in the script's block of 128 (first_port).
check ports_in_block test $((port + 1 - $(first_port 2))) -lt 128

cli_finish
