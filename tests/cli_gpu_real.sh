#!/usr/bin/env bash
# hetsim real on the local backend (one GPU, workers on green-context SM partitions): ssgd with
# three workers on partitions of 16 SMs trains mlp, the loss falls and the rows are complete.
# Needs a GPU: exits 77 (skipped) without one (mlp trains on the synthetic stand-in where
# Fashion-MNIST is not installed). Not run on a GPU yet.
# usage: cli_gpu_real.sh HETSIM_BINARY SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP # the short names this script uses
DB="$T/r.db"
cd "$T"
fashion_mnist_or_synthetic

common=(--model mlp --global-batch 48 --iterations 30 --workers 3 --train-samples 1500
        --eval-samples 300 --eval-every 10 --db "$T/r.db" --backend local)
"$H" real --policy ssgd "${common[@]}" --device cuda:0/sm=16 --json >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" != 0 ] && grep -q "no usable GPU\|no CUDA support\|no usable GPU driver\|has no CUDA" "$T/err"; then
  echo "skipped: $(head -c 300 "$T/err")"
  exit 77
fi
check local_ssgd_exit test "$rc" = 0 || head -c 600 "$T/err"
id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' "$T/out")
check local_ssgd_json test -n "$id"
if [ -n "$id" ]; then
  check local_ssgd_complete test "$(q "SELECT kind || ' ' || status FROM run WHERE id = $id")" = "real complete"
  check local_ssgd_workers test "$(q "SELECT count(*) FROM worker WHERE run_id = $id AND steps > 0")" = 3
  # Without a cluster file a run on the local backend is stored as cuda threads (not the cpu's).
  check local_ssgd_names test "$(q "SELECT cluster_name || ' ' || (SELECT group_concat(DISTINCT device_type) FROM worker
      WHERE run_id = $id) FROM run WHERE id = $id")" = "cuda-threads cuda"
  check local_ssgd_json_cluster grep -q '"cluster": "cuda-threads"' "$T/out"
  check local_ssgd_loss_falls test "$(q "SELECT (SELECT loss FROM eval WHERE run_id = $id ORDER BY step LIMIT 1) >
      (SELECT loss FROM eval WHERE run_id = $id ORDER BY step DESC LIMIT 1)")" = 1
fi
cli_finish
