#!/usr/bin/env bash
# Time to accuracy: hetsim's prediction for a model of one's own against real PyTorch DDP
# training to the same accuracy (docs/performance.md, "Time to accuracy against PyTorch DDP").
# A user's whole path, on this machine's CPU, for bench/user_net.py (a network outside the zoo):
#
#   bash bench/bench_ddp_accuracy.sh HETSIM [OUTDIR]
#
# 1. tools/hetsim_profile.py profiles the network the way DDP runs it (wrapped in DDP, two
#    processes stepping at once, gloo's all-reduce as DDP issues it after each step at BATCH)
#    and trains it for CURVE_EPOCHS epochs of Fashion-MNIST in one process at the global batch
#    2 x BATCH (--curves: held-out loss and accuracy on EVAL_SAMPLES test images), and once more
#    as local SGD of 2 replicas averaged every LOCAL_PERIOD steps (--curve-periods);
# 2. `hetsim calib import` the profile, `hetsim fit-convergence --curves` the curves (the
#    analytic model's loss and accuracy map, stored beside the import), and the cluster: two
#    workers of this CPU whose compute, link and step noise come from the import (as
#    bench/bench_ddp.sh's);
# 3. for each case, `hetsim sim --convergence analytic:eval_every=EVAL_EVERY --target-accuracy
#    TARGET` predicts the time and the iterations to the target, and bench/ddp_train.py trains
#    the network for real with DDP (gloo, two pinned single-thread processes, the same lr,
#    momentum and global batch), evaluating every EVAL_EVERY iterations on the same test images
#    and stopping at the first evaluation at the target (its training time excludes the
#    evaluations, as the simulation's does); its seed (initial weights, sample order) is the
#    pass's number plus 1, not the curves' 1: a user's training is not the profiler's run;
#    - homo: both ranks at BATCH, ssgd;
#    - slow: rank 1 slowed SLOW times (DDP: SLOW-1 extra passes; hetsim: `slowdown: SLOW`), ssgd;
#    - lbb: the slow cluster under hetsim's lbb:dynamic=0; DDP runs the batches its static solve
#      gives (the same global batch, so the same updates);
#    - local: both ranks at BATCH, hetsim's localsgd:tau=LOCAL_PERIOD; PyTorch's local SGD
#      (ddp_train.py --local-period: PeriodicModelAverager every LOCAL_PERIOD steps, no DDP).
#      Its iterations are local steps (hetsim's averages x LOCAL_PERIOD).
# Prints each pass's figures and the medians over the passes, and writes OUTDIR/results.json.
# Settings (environment): BATCH (64 per rank), LR (0.01), TARGET (0.85), EVAL_EVERY (25),
# LOCAL_PERIOD (5; EVAL_EVERY must be a multiple of it),
# CURVE_EPOCHS (3), EVAL_SAMPLES (2000), SLOW (2), REPEATS (3), BUDGET (1 s of timed steps per
# batch size in the profile), HUGEPAGES (1, as bench_ddp.sh), QUICK=1 (CI: one pass, a low
# target, short curves: checks that the path runs, not the numbers).
# Needs /usr/bin/python3 with torch (Debian's python3-torch; or HETSIM_TORCH_PYTHON) and
# Fashion-MNIST (Debian's dataset-fashion-mnist). Quiet machine for the figures.
set -euo pipefail
H=$(readlink -f "${1:?usage: bench_ddp_accuracy.sh HETSIM [OUTDIR]}")
OUT=${2:-$(mktemp -d "${TMPDIR:-/tmp}/hetsim-ddp-acc.XXXXXX")}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${HETSIM_TORCH_PYTHON:-/usr/bin/python3}
NET=user_net:build
NAME=usernet
BATCH=${BATCH:-64}
LR=${LR:-0.01}
SLOW=${SLOW:-2}
EVAL_SAMPLES=${EVAL_SAMPLES:-2000}
if [ "${QUICK:-0}" = 1 ]; then
  TARGET=${TARGET:-0.6}; EVAL_EVERY=${EVAL_EVERY:-10}; CURVE_EPOCHS=${CURVE_EPOCHS:-0.2}
  REPEATS=${REPEATS:-1}; BUDGET=${BUDGET:-0.05}; EVAL_SAMPLES=${EVAL_SAMPLES_QUICK:-500}
else
  TARGET=${TARGET:-0.85}; EVAL_EVERY=${EVAL_EVERY:-25}; CURVE_EPOCHS=${CURVE_EPOCHS:-3}
  REPEATS=${REPEATS:-3}; BUDGET=${BUDGET:-1}
fi
[[ $SLOW =~ ^[1-9][0-9]*$ ]] || { echo "bench_ddp_accuracy.sh: SLOW is a whole number, got $SLOW" >&2; exit 2; }
LOCAL_PERIOD=${LOCAL_PERIOD:-5}
[[ $LOCAL_PERIOD =~ ^[1-9][0-9]*$ ]] && [ $((EVAL_EVERY % LOCAL_PERIOD)) = 0 ] || {
  echo "bench_ddp_accuracy.sh: LOCAL_PERIOD must be a whole number dividing EVAL_EVERY ($EVAL_EVERY), got $LOCAL_PERIOD" >&2
  exit 2
}
GB=$((2 * BATCH))
PROFILE_BATCHES=$((BATCH / 4)),$((BATCH / 2)),$BATCH,$((3 * BATCH / 2)),$((2 * BATCH))
log() { echo "bench_ddp_accuracy: $*" >&2; }
if [ "${HUGEPAGES:-1}" = 1 ]; then
  export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
fi
# The network's module is imported from bench/ (module.path:factory, the current folder on
# sys.path), by the profiler and by DDP alike.
cd "$SRC/bench"

one_pass() { # one_pass DIR: DIR/cases.json
  local P=$1
  mkdir -p "$P"
  log "profiling $NAME (ddp, 2 concurrent, DDP's all-reduce at $BATCH) at batches $PROFILE_BATCHES; curves at $GB"
  "$PY" "$SRC/tools/hetsim_profile.py" --model "$NET" --name "$NAME" --input 1x28x28 --classes 10 --device cpu \
    --ddp --concurrent 2 --batches "$PROFILE_BATCHES" --budget "$BUDGET" --comm --comm-world 2 \
    --comm-budget "$BUDGET" --comm-step "$BATCH" --curves "$P/curves.csv" --curve-data fashion-mnist \
    --curve-batch "$GB" --curve-lr "$LR" --curve-epochs "$CURVE_EPOCHS" --curve-eval-samples "$EVAL_SAMPLES" \
    --curve-periods "1,$LOCAL_PERIOD" --curve-workers 2 \
    --device-name cpu-ddp --quiet --out "$P/profile.json"
  rm -f "$P/cal.db" "$P/sim.db"
  "$H" calib import "$P/profile.json" --db "$P/cal.db" --json >"$P/import.json"
  # The device as imported: the profile's name with " (2 workers)", its steps timed two at once.
  local dev
  dev=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["imports"][0]["device"])' "$P/import.json")
  # Fashion-MNIST's 60,000 training images an epoch (the curves' epochs are rounded to 6 digits).
  "$H" fit-convergence --curves "$P/curves.csv" --model "$NAME" --dataset-size 60000 --db "$P/cal.db" \
    --json >"$P/fit.json"
  for c in homo:1 slow:"$SLOW"; do
    cat >"$P/${c%%:*}.yaml" <<YAML
# bench/bench_ddp_accuracy.sh: two workers of this CPU, compute, link and noise imported from
# $P/profile.json.
name: ddp-cpu
device_types:
  c: {compute: {calib: "$dev"}}
nodes:
  - {name: n0, link: {calib: "$dev"}, devices: [{type: c}, {type: c, slowdown: ${c#*:}}]}
jitter: {calib: "$dev"}
YAML
  done
  # One case: the simulation, then DDP on the batches it ran (step 0's: the same throughout
  # for ssgd and lbb:dynamic=0).
  case_run() { # case_run NAME CLUSTER POLICY SLOWDOWN [LOCAL_PERIOD]
    local t=${5:-1} local_args=()
    [ "$t" -gt 1 ] && local_args=(--local-period "$t")
    "$H" sim --cluster "$P/$2.yaml" --model "$NAME" --policy "$3" --global-batch "$GB" \
      --convergence "analytic:eval_every=$((EVAL_EVERY / t))" --target-accuracy "$TARGET" --epochs 30 \
      --calib "$P/cal.db" --db "$P/sim.db" --store steps --json >"$P/$1.sim.json"
    local b
    b=$("$PY" -c '
import json, sqlite3, sys
run = json.load(open(sys.argv[1]))["run_id"]
c = sqlite3.connect(sys.argv[2])
print(",".join(str(b) for (b,) in c.execute("SELECT batch FROM step WHERE run_id = ? AND step = 0 ORDER BY worker", (run,))))' \
      "$P/$1.sim.json" "$P/sim.db")
    log "case $1: $3, batches $b, rank 1 slowed ${4}x: DDP to accuracy $TARGET"
    "$PY" "$SRC/bench/ddp_train.py" --model "$NET" --input 1x28x28 --classes 10 --batches "$b" --slowdown "1:$4" \
      --data fashion-mnist --eval-samples "$EVAL_SAMPLES" --eval-every "$EVAL_EVERY" --target-accuracy "$TARGET" \
      --lr "$LR" --momentum 0.9 --seed "$((k + 1))" "${local_args[@]}" --quiet --out "$P/$1.ddp.json"
  }
  case_run homo homo ssgd 1
  case_run slow slow ssgd "$SLOW"
  case_run lbb slow lbb:dynamic=0 "$SLOW"
  case_run local homo "localsgd:tau=$LOCAL_PERIOD" 1 "$LOCAL_PERIOD"
}

for k in $(seq 1 "$REPEATS"); do
  log "pass $k of $REPEATS"
  one_pass "$OUT/pass$k"
done

"$PY" - "$OUT" "$REPEATS" "$LOCAL_PERIOD" <<'PY'
import json, statistics, sys
out, reps, period = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cases = ["homo", "slow", "lbb", "local"]
rows = {c: [] for c in cases}
for k in range(1, reps + 1):
    p = f"{out}/pass{k}"
    fit = json.load(open(f"{p}/fit.json"))
    print(f"pass {k}: the curves' fit: loss rmse {fit['loss_rms']:.4f}, accuracy rmse {fit['accuracy_rms']:.4f}")
    for c in cases:
        s, d = json.load(open(f"{p}/{c}.sim.json")), json.load(open(f"{p}/{c}.ddp.json"))
        st, dt = s["time_to_target_s"], d["time_to_target_s"]
        # iterations: steps of each rank (a localsgd iteration is an average of `period` of them)
        si = s["iterations"] * (period if c == "local" else 1)
        di = next((e["iter"] for e in d["evals"] if e["accuracy"] >= d["target_accuracy"]), None)
        r = {"pass": k, "sim_time_s": st, "ddp_time_s": dt, "sim_iterations": si, "ddp_iterations": di,
             "sim_mean_iteration_s": s["mean_iteration_s"] / (period if c == "local" else 1),
             "ddp_mean_iteration_s": (dt / di) if dt and di else None,
             "batches": d["batches"],
             "time_error": (st / dt - 1) if st and dt else None,
             "iteration_error": (si / di - 1) if si and di else None}
        rows[c].append(r)
        print(f"  {c:5s} batches {r['batches']}: time to target sim {st} s, DDP {dt} s (error {r['time_error']}); "
              f"iterations sim {si}, DDP {di} (error {r['iteration_error']})")
med = lambda xs: statistics.median(xs) if xs else None
summary = {}
print("\nmedians over %d pass(es):" % reps)
print("| case | time-to-target error | iterations-to-target error | sim / DDP time per iteration |")
print("|---|---|---|---|")
for c in cases:
    te = [r["time_error"] for r in rows[c] if r["time_error"] is not None]
    ie = [r["iteration_error"] for r in rows[c] if r["iteration_error"] is not None]
    pe = [r["sim_mean_iteration_s"] / r["ddp_mean_iteration_s"] for r in rows[c] if r["ddp_mean_iteration_s"]]
    summary[c] = {"time_error": med(te), "iteration_error": med(ie), "per_iteration_ratio": med(pe), "passes": rows[c]}
    f = lambda x: "n/a" if x is None else "%+.3f" % x
    print(f"| {c} | {f(med(te))} | {f(med(ie))} | {'n/a' if not pe else '%.3f' % med(pe)} |")
json.dump(summary, open(f"{out}/results.json", "w"), indent=1)
PY
