#!/usr/bin/env bash
# The check of hetsim's predictions against real PyTorch DistributedDataParallel (issue 15 §4,
# docs/performance.md "Against PyTorch DDP"): a user's whole path on this machine's CPU.
#
#   bash bench/bench_ddp.sh HETSIM [OUTDIR]
#
# 1. profile MODEL with tools/hetsim_profile.py the way the run executes: wrapped in DDP at world
#    size 1, two processes stepping at once (each pinned to its own CPU, one thread), and gloo's
#    all-reduce and p2p between two processes;
# 2. `hetsim calib import` it, and write the cluster: two workers on one node whose compute and
#    link come from the import (compute {MODEL: {calib: DEVICE}}, link {calib: DEVICE});
# 3. for each case, run real DDP (bench/ddp_train.py: gloo, two pinned single-thread processes)
#    and simulate the same model, batches and iterations, and compare the mean iteration times:
#    - homo: both ranks at BATCH;
#    - slow: rank 1 slowed SLOW times (ddp_train --slow-mode sleep: it sleeps (SLOW-1) x its own
#      compute, as a slower device would; hetsim: `slowdown: SLOW` on worker 1);
#    - lbb:  the slow cluster under hetsim's lbb, whose per-worker batches (its static solve from
#      the imported t(b), the batches it holds at the end of the run) DDP then runs with.
# Prints one line per case and writes OUTDIR/results.json. Settings (environment): MODEL (cnn),
# BATCH (256 per rank), ITER (40 timed iterations), WARMUP (5), SLOW (2), REPEATS (1: real runs
# per case, the median is compared), BUDGET (3 s of timed steps per batch size in the profile),
# PROFILE_BATCHES (the batch sizes profiled; default spans what lbb may give a worker),
# QUICK=1 (CI: tiny batches and iterations; checks that the path runs, not the numbers).
# Needs /usr/bin/python3 with torch (Debian's python3-torch). Quiet machine for the figures.
set -euo pipefail
H=$(readlink -f "${1:?usage: bench_ddp.sh HETSIM [OUTDIR]}")
OUT=${2:-$(mktemp -d "${TMPDIR:-/tmp}/hetsim-ddp.XXXXXX")}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
MODEL=${MODEL:-cnn}
if [ "${QUICK:-0}" = 1 ]; then
  BATCH=${BATCH:-16}; ITER=${ITER:-3}; WARMUP=${WARMUP:-1}; BUDGET=${BUDGET:-0.05}
  PROFILE_BATCHES=${PROFILE_BATCHES:-4,8,16,24,32}
else
  BATCH=${BATCH:-256}; ITER=${ITER:-40}; WARMUP=${WARMUP:-5}; BUDGET=${BUDGET:-3}
fi
SLOW=${SLOW:-2}
REPEATS=${REPEATS:-1}
PROFILE_BATCHES=${PROFILE_BATCHES:-$((BATCH / 4)),$((BATCH / 2)),$((3 * BATCH / 4)),$BATCH,$((5 * BATCH / 4)),$((3 * BATCH / 2)),$((7 * BATCH / 4))}
log() { echo "bench_ddp: $*" >&2; }

# 1. The profile.
log "profiling $MODEL (ddp, 2 concurrent, gloo comm) at batches $PROFILE_BATCHES"
"$PY" "$SRC/tools/hetsim_profile.py" --model "$MODEL" --device cpu --ddp --concurrent 2 \
  --batches "$PROFILE_BATCHES" --budget "$BUDGET" --comm --comm-world 2 --comm-budget "$BUDGET" \
  --device-name "cpu-ddp" --quiet --out "$OUT/profile.json"
# 2. Import, and the cluster.
rm -f "$OUT/cal.db"
"$H" calib import "$OUT/profile.json" --db "$OUT/cal.db" --json >"$OUT/import.json"
DEV=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; d=d.get("imports",[d])[0] if "imports" in d else d; print(d["device"])' "$OUT/import.json")
cluster() { # cluster FILE SLOWDOWN
  cat >"$1" <<YAML
# bench/bench_ddp.sh: two workers of this CPU (one thread each), compute and link measured by
# tools/hetsim_profile.py and imported ($OUT/profile.json).
name: ddp-cpu
device_types:
  c: {compute: {$MODEL: {calib: "$DEV"}}}
nodes:
  - {name: n0, link: {calib: "$DEV"}, devices: [{type: c, count: 2}]}
events:
  - {at: 0s, worker: 1, slowdown: $2}
YAML
}
cluster "$OUT/homo.yaml" 1
cluster "$OUT/slow.yaml" "$SLOW"

sim_mean() { # sim_mean CLUSTER POLICY DB -> prints mean_iteration_s
  "$H" sim --cluster "$1" --model "$MODEL" --policy "$2" --global-batch $((2 * BATCH)) \
    --iterations "$ITER" --calib "$OUT/cal.db" --db "$3" --json |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["mean_iteration_s"])'
}
ddp_run() { # ddp_run NAME BATCHES SLOWDOWN -> OUT/NAME-K.json for K in 1..REPEATS
  local k
  for k in $(seq 1 "$REPEATS"); do
    "$PY" "$SRC/bench/ddp_train.py" --model "$MODEL" --batches "$2" --iterations "$ITER" \
      --warmup "$WARMUP" --slowdown "1:$3" --slow-mode sleep --quiet --out "$OUT/$1-$k.json"
  done
}

rm -f "$OUT/sim.db"
log "case homo: batches $BATCH,$BATCH"
ddp_run homo "$BATCH,$BATCH" 1
s_homo=$(sim_mean "$OUT/homo.yaml" ssgd "$OUT/sim.db")
log "case slow: worker 1 slowed ${SLOW}x"
ddp_run slow "$BATCH,$BATCH" "$SLOW"
s_slow=$(sim_mean "$OUT/slow.yaml" ssgd "$OUT/sim.db")
s_lbb=$(sim_mean "$OUT/slow.yaml" lbb "$OUT/sim.db")
# The batches lbb holds at the end of its run (the last step of each worker).
LBB=$("$H" query --db "$OUT/sim.db" --csv sql "SELECT group_concat(batch, ',') FROM (SELECT s.worker, s.batch FROM step s WHERE s.run_id = (SELECT max(id) FROM run) AND s.step = (SELECT max(step) FROM step t WHERE t.run_id = s.run_id AND t.worker = s.worker) ORDER BY s.worker)" 2>/dev/null | tail -n 1 | tr -d '\r"')
if [ -z "$LBB" ] || [ "$LBB" = "group_concat(batch, ',')" ]; then
  LBB=$("$H" query --db "$OUT/sim.db" --csv sql "SELECT group_concat(initial_batch, ',') FROM (SELECT initial_batch FROM worker WHERE run_id = (SELECT max(id) FROM run) ORDER BY idx)" | tail -n 1 | tr -d '\r"')
fi
log "case lbb: batches $LBB (worker 1 slowed ${SLOW}x)"
ddp_run lbb "$LBB" "$SLOW"

"$PY" - "$OUT" "$REPEATS" "$s_homo" "$s_slow" "$s_lbb" "$LBB" "$MODEL" "$BATCH" "$SLOW" <<'PY'
import json, statistics, sys
out, reps, s_homo, s_slow, s_lbb, lbb, model, batch, slow = sys.argv[1:]
reps = int(reps)
def real(name):
    runs = [json.load(open(f"{out}/{name}-{k}.json")) for k in range(1, reps + 1)]
    means = [r["summary"]["mean_iteration_s"] for r in runs]
    spread = [r["summary"]["compute_spread"] for r in runs]
    return statistics.median(means), statistics.median(spread), means
res = {"model": model, "batch_per_rank": int(batch), "slowdown": float(slow), "repeats": reps,
       "lbb_batches": [int(b) for b in lbb.split(",")], "cases": {}}
print(f"{'case':6} {'ddp_ms':>9} {'sim_ms':>9} {'error':>8} {'ddp_compute_spread':>19}")
for name, sim in (("homo", s_homo), ("slow", s_slow), ("lbb", s_lbb)):
    m, spread, means = real(name)
    sim = float(sim)
    err = sim / m - 1
    res["cases"][name] = {"ddp_mean_iteration_s": m, "ddp_runs": means, "sim_mean_iteration_s": sim,
                          "error": err, "ddp_compute_spread": spread}
    print(f"{name:6} {m*1e3:9.2f} {sim*1e3:9.2f} {err:+8.3f} {spread:19.3f}")
json.dump(res, open(f"{out}/results.json", "w"), indent=1)
print(f"results: {out}/results.json")
PY
