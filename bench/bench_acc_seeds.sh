#!/usr/bin/env bash
# Iterations to a target accuracy: hetsim's one prediction against real training over many
# seeds (docs/performance.md, "Iterations to a target accuracy over 30 seeds").
#
#   bash bench/bench_acc_seeds.sh HETSIM OUTDIR
#
# 1. Unless OUTDIR/evals.csv is there already: bench/ddp_train.py trains NET (bench/user_net.py) on
#    Fashion-MNIST (DDP, gloo, two pinned single-thread ranks at BATCH each, lr LR, momentum 0.9)
#    with seeds 1..SEEDS for ITERATIONS iterations, evaluating every EVAL_EVERY on EVAL_SAMPLES
#    test images: bench/bench_ddp_accuracy.sh's homogeneous case without a target, so that every
#    seed's whole curve is kept (OUTDIR/seedK.json.gz, and OUTDIR/evals.csv:
#    seed,iteration,samples,loss,accuracy). About 8 s a seed (user_net, 800 iterations); the
#    iterations are what is compared, so a busy machine changes only how long it takes.
# 2. hetsim, from the profile and the curves of FROM (default: pass 1 of
#    notebooks-data/ddp-accuracy-2026-11-29, the fit bench_ddp_accuracy.sh used): `calib import`,
#    `fit-convergence --curves`, then for each target in TARGETS `hetsim sim --convergence
#    analytic:eval_every=EVAL_EVERY --target-accuracy A` on the two workers, once as fitted and
#    once with acc_noise=0 (the evaluations noise-free), and, with BASE=HETSIM_BUILD of an
#    earlier commit, once by that build from its own fit ("before": 5ffe471, the exponential
#    accuracy map and no acc_noise, in docs/performance.md).
# 3. For each target: the seeds' first evaluation at the target (median and quartiles) against
#    each prediction. Prints a table and writes OUTDIR/results.json.
# Settings (environment): SEEDS (30), ITERATIONS (800), EVAL_EVERY (25), EVAL_SAMPLES (2000),
# BATCH (64), LR (0.01), TARGETS (0.80 0.82 0.83 0.84 0.85 0.86), FROM, BASE, NOISE_FROM (200);
# NET (user_net:build, a module:factory of bench/ or a zoo model, as ddp_train.py --model) and
# NAME (usernet: the model name in FROM's profile.json and the fit), for another network: FROM
# must then hold that network's profile and curves.
set -euo pipefail
H=$(readlink -f "${1:?usage: bench_acc_seeds.sh HETSIM OUTDIR}")
OUT=${2:?usage: bench_acc_seeds.sh HETSIM OUTDIR}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${HETSIM_TORCH_PYTHON:-/usr/bin/python3}
SEEDS=${SEEDS:-30}
ITERATIONS=${ITERATIONS:-800}
EVAL_EVERY=${EVAL_EVERY:-25}
EVAL_SAMPLES=${EVAL_SAMPLES:-2000}
BATCH=${BATCH:-64}
LR=${LR:-0.01}
TARGETS=${TARGETS:-0.80 0.82 0.83 0.84 0.85 0.86}
NET=${NET:-user_net:build}
NAME=${NAME:-usernet}
FROM=$(readlink -f "${FROM:-$SRC/notebooks-data/ddp-accuracy-2026-11-29/pass1}")
log() { echo "bench_acc_seeds: $*" >&2; }

if [ -s "$OUT/evals.csv" ]; then
  log "$OUT/evals.csv is there: not training again"
else
  cd "$SRC/bench"
  for s in $(seq 1 "$SEEDS"); do
    log "seed $s of $SEEDS"
    "$PY" ddp_train.py --model "$NET" --input 1x28x28 --classes 10 --batches "$BATCH,$BATCH" \
      --lr "$LR" --momentum 0.9 --seed "$s" --data fashion-mnist --eval-samples "$EVAL_SAMPLES" \
      --eval-every "$EVAL_EVERY" --iterations "$ITERATIONS" --quiet --out "$OUT/seed$s.json"
    gzip -f "$OUT/seed$s.json"
  done
  "$PY" - "$OUT" "$SEEDS" <<'EOF'
import gzip, json, sys
out, seeds = sys.argv[1], int(sys.argv[2])
with open(f"{out}/evals.csv.tmp", "w") as f:
    f.write("seed,iteration,samples,loss,accuracy\n")
    for s in range(1, seeds + 1):
        d = json.load(gzip.open(f"{out}/seed{s}.json.gz"))
        for e in d["evals"]:
            f.write(f"{s},{e['iter']},{e['samples']},{e['loss']:.6f},{e['accuracy']:.6f}\n")
EOF
  mv "$OUT/evals.csv.tmp" "$OUT/evals.csv"
fi

# hetsim's predictions, from the curves of FROM.
cd "$OUT"
rm -f cal.db sim.db
"$H" calib import "$FROM/profile.json" --db cal.db --json >import.json
"$H" fit-convergence --curves "$FROM/curves.csv" --model "$NAME" --dataset-size 60000 --db cal.db --json >fit.json
dev=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["imports"][0]["device"])' import.json)
cat >homo.yaml <<YAML
# bench/bench_acc_seeds.sh: two workers of this CPU, compute, link and noise imported from
# $FROM/profile.json.
name: ddp-cpu
device_types:
  c: {compute: {calib: "$dev"}}
nodes:
  - {name: n0, link: {calib: "$dev"}, devices: [{type: c}, {type: c}]}
jitter: {calib: "$dev"}
YAML
variants="fitted noisefree"
if [ -n "${BASE:-}" ]; then
  BASE=$(readlink -f "$BASE")
  rm -f base-cal.db base-sim.db
  "$BASE" calib import "$FROM/profile.json" --db base-cal.db --json >/dev/null
  "$BASE" fit-convergence --curves "$FROM/curves.csv" --model "$NAME" --dataset-size 60000 --db base-cal.db \
    --json >base-fit.json
  variants="$variants before"
fi
for a in $TARGETS; do
  for v in $variants; do
    case $v in
      fitted) h=$H cal=cal.db extra="" ;;
      noisefree) h=$H cal=cal.db extra=",acc_noise=0" ;;
      before) h=$BASE cal=base-cal.db extra="" ;;
    esac
    "$h" sim --cluster homo.yaml --model "$NAME" --policy ssgd --global-batch $((2 * BATCH)) \
      --convergence "analytic:eval_every=$EVAL_EVERY$extra" --target-accuracy "$a" --epochs 30 \
      --calib "$cal" --db "${cal%cal.db}sim.db" --json >"sim-$a-$v.json"
  done
done

"$PY" - "$OUT" "$TARGETS" <<'EOF'
import csv, json, math, os, statistics, sys
out, names_a = sys.argv[1], sys.argv[2].split()  # the targets as the file names give them
targets = [float(t) for t in names_a]
runs = {}
for r in csv.DictReader(open(f"{out}/evals.csv")):
    runs.setdefault(int(r["seed"]), []).append((int(r["iteration"]), float(r["accuracy"])))
fit = json.load(open(f"{out}/fit.json"))
print(f"{len(runs)} seeds; the fit to the curves of FROM: acc_noise {fit['params'].get('acc_noise')}, "
      f"loss rms {fit['loss_rms']:.4f}, accuracy rms {fit['accuracy_rms']:.4f}")
variants = [v for v in ("fitted", "noisefree", "before") if os.path.exists(f"{out}/sim-{names_a[0]}-{v}.json")]
names = {"fitted": "hetsim", "noisefree": "noise-free", "before": "before"}
print(f"{'target':>7} {'seeds: median':>14} {'q25':>6} {'q75':>6} {'not met':>8}"
      + "".join(f" {names[v]:>10} {'error':>7}" for v in variants))
rows = []
for a, name_a in zip(targets, names_a):
    first = [next((i for i, acc in sorted(e) if acc >= a), None) for e in runs.values()]
    met = sorted(i for i in first if i is not None)
    q = statistics.quantiles(met, n=4) if len(met) > 1 else [None, None, None]
    med = statistics.median(met) if len(met) * 2 > len(first) else None
    sim = {v: json.load(open(f"{out}/sim-{name_a}-{v}.json")) for v in variants}
    it = {v: s["iterations"] if s["time_to_target_s"] is not None else None for v, s in sim.items()}
    err = {v: (it[v] / med - 1) if it[v] and med else None for v in it}
    row = {"target": a, "seeds": len(first), "not_met": len(first) - len(met), "median": med, "q25": q[0], "q75": q[2]}
    for v in variants:
        row[v] = it[v]
        row[v + "_error"] = err[v]
    rows.append(row)
    f = lambda x: "-" if x is None else f"{x:+.1%}"
    print(f"{a:7.2f} {med!s:>14} {q[0]!s:>6} {q[2]!s:>6} {len(first) - len(met):8d}"
          + "".join(f" {it[v]!s:>10} {f(err[v]):>7}" for v in variants))
# The noise itself: each seed's evaluations about the seeds' mean from iteration NOISE_FROM (200)
# on (past the first steep rise), their lag-1 autocorrelation, and the median first passage computed on the
# seeds' own mean curve with that deviation (what acc_noise does, with the mean curve exact).
its = sorted({i for e in runs.values() for i, _ in e})
acc = {s: dict(e) for s, e in runs.items()}
mean = {i: statistics.mean(acc[s][i] for s in acc) for i in its}
start = int(os.environ.get("NOISE_FROM", "200"))
res = [[acc[s][i] - mean[i] for i in its if i >= start] for s in acc]
ss = sum(x * x for r in res for x in r)
if not ss:
    sys.exit(f"bench_acc_seeds: no scatter about the seeds' mean after iteration {start} (NOISE_FROM)")
sd = math.sqrt(ss / sum(len(r) for r in res))
lag1 = sum(r[k] * r[k + 1] for r in res for k in range(len(r) - 1)) / ss
def passage(sigma, a):
    miss = 1.0
    for i in its:
        miss *= 1 - (0.5 * math.erfc((a - mean[i]) / (sigma * math.sqrt(2))) if sigma > 0 else float(mean[i] >= a))
        if miss <= 0.5:
            return i
print(f"noise about the seeds' mean (iterations >= {start}): sd {sd:.4f}, lag-1 autocorrelation {lag1:+.3f}")
print("on the seeds' mean curve: " + "; ".join(f"{r['target']:.2f}: median {r['median']}, mean crossing "
      f"{passage(0, r['target'])}, first passage {passage(sd, r['target'])}" for r in rows))
noise = {"sd": sd, "lag1": lag1, "mean_curve": [{"target": r["target"], "mean_crossing": passage(0, r["target"]),
                                                  "first_passage": passage(sd, r["target"])} for r in rows]}
mae = {v: statistics.mean(abs(r[v + "_error"]) for r in rows if r[v + "_error"] is not None) for v in variants}
print("mean absolute error: " + ", ".join(f"{names[v]} {mae[v]:.1%}" for v in variants))
json.dump({"targets": rows, "fit": fit, "mean_abs_error": mae, "noise": noise}, open(f"{out}/results.json", "w"), indent=1)
EOF
