#!/usr/bin/env bash
# Local SGD's loss of progress: hetsim's analytic model (lambda_tau) fitted to real local-SGD
# curves, against PyTorch's own local SGD over several seeds and periods (docs/performance.md,
# "Local SGD against PyTorch's model averaging").
#
#   bash bench/bench_localsgd.sh HETSIM OUTDIR
#
# 1. Unless OUTDIR/evals.csv is there already: bench/ddp_train.py trains the zoo's MODEL on
#    Fashion-MNIST with RANKS gloo ranks of BATCH samples each (--pin none: the iterations are
#    compared, not the times), SGD lr LR, momentum 0.9, for each period T in TAUS and seed
#    1..SEEDS: DDP when T = 1, otherwise local SGD with PyTorch's PeriodicModelAverager
#    averaging the models after every T iterations (ddp_train.py --local-period T). A run trains
#    min(ITERATIONS, max(MIN_ITERATIONS, 40 T)) iterations (longer periods need more to reach
#    the targets) and evaluates every max(EVAL_EVERY, T) iterations (right after an average) on
#    EVAL_SAMPLES test images. OUTDIR/evals.csv: tau,seed,iteration,samples,loss,accuracy.
#    10-60 s a run on 2 CPUs (DDP of 4 ranks the slowest).
# 2. hetsim fits the analytic model to seed FIT_SEED's curves (`fit-convergence --curves`, the
#    rows' policy ddp or localsgd with their period): "fitted" from the periods in FIT_TAUS
#    (lambda_tau fitted), "ddp-only" from T = 1 alone (lambda_tau keeps its default, 0.05: what a
#    fit of DDP curves gives today), and "no-penalty", the ddp-only fit with lambda_tau = 0.
# 3. For each T in TAUS and each target (TARGET_LOSSES, TARGET_ACCS), `hetsim sim --policy
#    localsgd:tau=T` on RANKS workers at global batch RANKS x BATCH, evaluated as the real runs,
#    predicts the local steps to the target (averages x T); the seeds other than FIT_SEED give
#    the real ones (their first evaluation at the target: median and quartiles). Prints a table
#    and writes OUTDIR/results.json. bench/localsgd_forms.py compares other forms of the penalty
#    on the same curves.
# Settings (environment): MODEL (mlp; or cnn), SEEDS (6), TAUS (1 8 32 64 128), FIT_TAUS (1 64), FIT_SEED (1),
# RANKS (4), BATCH (32), LR (0.05), ITERATIONS (2560), MIN_ITERATIONS (768), EVAL_EVERY (16; it
# and each T must be multiples one of the other), EVAL_SAMPLES (2000), TARGET_LOSSES
# (0.6 0.5 0.45), TARGET_ACCS (0.80 0.83 0.84).
set -euo pipefail
H=$(readlink -f "${1:?usage: bench_localsgd.sh HETSIM OUTDIR}")
OUT=${2:?usage: bench_localsgd.sh HETSIM OUTDIR}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${HETSIM_TORCH_PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-mlp}
SEEDS=${SEEDS:-6}
TAUS=${TAUS:-1 8 32 64 128}
FIT_TAUS=${FIT_TAUS:-1 64}
FIT_SEED=${FIT_SEED:-1}
RANKS=${RANKS:-4}
BATCH=${BATCH:-32}
LR=${LR:-0.05}
ITERATIONS=${ITERATIONS:-2560}
MIN_ITERATIONS=${MIN_ITERATIONS:-768}
EVAL_EVERY=${EVAL_EVERY:-16}
EVAL_SAMPLES=${EVAL_SAMPLES:-2000}
TARGET_LOSSES=${TARGET_LOSSES:-0.6 0.5 0.45}
TARGET_ACCS=${TARGET_ACCS:-0.80 0.83 0.84}
log() { echo "bench_localsgd: $*" >&2; }
every() { # the iterations between evaluations at period $1
  if [ "$1" -gt "$EVAL_EVERY" ]; then echo "$1"; else echo "$EVAL_EVERY"; fi
}
iterations() { # the iterations trained at period $1
  local n=$((40 * $1))
  [ "$n" -lt "$MIN_ITERATIONS" ] && n=$MIN_ITERATIONS
  [ "$n" -gt "$ITERATIONS" ] && n=$ITERATIONS
  echo "$n"
}
for t in $TAUS $FIT_TAUS; do
  if [ $((EVAL_EVERY % t)) -ne 0 ] && [ $((t % EVAL_EVERY)) -ne 0 ]; then
    log "EVAL_EVERY $EVAL_EVERY and the period $t: neither is a multiple of the other"; exit 2
  fi
done
case $MODEL in mlp | cnn) ;; *) log "MODEL must be mlp or cnn (Fashion-MNIST models of the zoo)"; exit 2 ;; esac
case " $TAUS " in *" 1 "*) ;; *) log "TAUS must hold 1 (DDP: the ddp-only fit)"; exit 2 ;; esac
for t in $FIT_TAUS; do
  case " $TAUS " in *" $t "*) ;; *) log "FIT_TAUS: $t is not in TAUS"; exit 2 ;; esac
done
if [ "$FIT_SEED" -lt 1 ] || [ "$FIT_SEED" -gt "$SEEDS" ]; then log "FIT_SEED must be in 1..SEEDS"; exit 2; fi

if [ -s "$OUT/evals.csv" ]; then
  log "$OUT/evals.csv is there: not training again"
else
  batches=$(printf "$BATCH,%.0s" $(seq 1 "$RANKS"))
  cd "$SRC/bench"
  for t in $TAUS; do
    for s in $(seq 1 "$SEEDS"); do
      log "period $t, seed $s of $SEEDS"
      local_args=()
      [ "$t" -gt 1 ] && local_args=(--local-period "$t")
      "$PY" ddp_train.py --model "$MODEL" --batches "${batches%,}" --pin none --lr "$LR" --momentum 0.9 \
        --seed "$s" --data fashion-mnist --eval-samples "$EVAL_SAMPLES" --eval-every "$(every "$t")" \
        --iterations "$(iterations "$t")" "${local_args[@]}" --quiet --out "$OUT/tau$t-seed$s.json"
      gzip -f "$OUT/tau$t-seed$s.json"
    done
  done
  "$PY" - "$OUT" "$SEEDS" "$TAUS" <<'EOF'
import gzip, json, sys
out, seeds, taus = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3].split()]
with open(f"{out}/evals.csv.tmp", "w") as f:
    f.write("tau,seed,iteration,samples,loss,accuracy\n")
    for t in taus:
        for s in range(1, seeds + 1):
            d = json.load(gzip.open(f"{out}/tau{t}-seed{s}.json.gz"))
            for e in d["evals"]:
                f.write(f"{t},{s},{e['iter']},{e['samples']},{e['loss']:.6f},{e['accuracy']:.6f}\n")
EOF
  mv "$OUT/evals.csv.tmp" "$OUT/evals.csv"
fi

# The curves hetsim is fitted to: seed FIT_SEED's, as a user would record them.
cd "$OUT"
"$PY" - "$OUT" "$FIT_SEED" "$FIT_TAUS" "$RANKS" "$BATCH" <<'EOF'
import csv, sys
out, seed, fit_taus, ranks, batch = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4], sys.argv[5]
rows = [r for r in csv.DictReader(open(f"{out}/evals.csv")) if r["seed"] == seed]
for name, taus in (("fitted", fit_taus), ("ddp-only", ["1"])):
    with open(f"{out}/curves-{name}.csv", "w") as f:
        f.write("samples,loss,accuracy,batch,workers,policy,period\n")
        for r in rows:
            if r["tau"] in taus:
                pol, per = ("ddp", "") if r["tau"] == "1" else ("localsgd", r["tau"])
                f.write(f"{r['samples']},{r['loss']},{r['accuracy']},{batch},{ranks},{pol},{per}\n")
EOF
for v in fitted ddp-only; do
  rm -f "$v.db"
  "$H" fit-convergence --curves "curves-$v.csv" --model "$MODEL" --db "$v.db" --json >"fit-$v.json"
done
workers=$(printf "{type: c}, %.0s" $(seq 1 "$RANKS"))
cat >cluster.yaml <<YAML
# bench/bench_localsgd.sh: $RANKS equal workers; the iterations to a target do not depend on speed.
name: localsgd-$RANKS
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  c: {compute: {$MODEL: {t0: 1ms, per_sample: 0.05ms}}}
nodes:
  - {name: n0, devices: [${workers%, }]}
jitter: {cv: 0.0}
YAML
for t in $TAUS; do
  for kind in loss acc; do
    if [ $kind = loss ]; then targets=$TARGET_LOSSES; flag=--target-loss; else targets=$TARGET_ACCS; flag=--target-accuracy; fi
    for a in $targets; do
      for v in fitted ddp-only no-penalty; do
        db=$v.db extra=""
        [ $v = no-penalty ] && db=ddp-only.db extra=",lambda_tau=0"
        "$H" sim --cluster cluster.yaml --model "$MODEL" --policy "localsgd:tau=$t" --global-batch $((RANKS * BATCH)) \
          --convergence "analytic:eval_every=$(($(every "$t") / t))$extra" $flag "$a" --epochs 40 \
          --db "$db" --json >"sim-$t-$kind-$a-$v.json"
      done
    done
  done
done

"$PY" - "$OUT" "$TAUS" "$FIT_SEED" "$TARGET_LOSSES" "$TARGET_ACCS" "$FIT_TAUS" <<'EOF'
import csv, json, statistics, sys
out, taus, fit_seed, fit_taus = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[6].split()
targets = [("loss", a) for a in sys.argv[4].split()] + [("acc", a) for a in sys.argv[5].split()]
curves = {}
for r in csv.DictReader(open(f"{out}/evals.csv")):
    if r["seed"] != fit_seed:
        curves.setdefault((r["tau"], r["seed"]), []).append((int(r["iteration"]), float(r["loss"]), float(r["accuracy"])))
fits = {v: json.load(open(f"{out}/fit-{v}.json")) for v in ("fitted", "ddp-only")}
print(f"fitted: lambda_tau {fits['fitted']['params']['lambda_tau']:.4g} from periods {', '.join(fit_taus)} of seed "
      f"{fit_seed} (loss rms {fits['fitted']['loss_rms']:.4f}); ddp-only: lambda_tau "
      f"{fits['ddp-only']['params']['lambda_tau']:.4g} (loss rms {fits['ddp-only']['loss_rms']:.4f})")
variants = ("fitted", "ddp-only", "no-penalty")
print(f"{'T':>4} {'target':>10} {'seeds: median':>14} {'q25':>6} {'q75':>6} {'not met':>8}"
      + "".join(f" {v:>10} {'error':>7}" for v in variants))
rows = []
for t in taus:
    for kind, a in targets:
        x = float(a)
        met_at = lambda e: (e[1] <= x) if kind == "loss" else (e[2] >= x)
        first = [next((e[0] for e in sorted(c) if met_at(e)), None) for (tt, _), c in curves.items() if tt == t]
        met = sorted(i for i in first if i is not None)
        q = statistics.quantiles(met, n=4) if len(met) > 1 else [None, None, None]
        med = statistics.median(met) if len(met) * 2 > len(first) else None
        row = {"tau": int(t), "kind": kind, "target": x, "seeds": len(first), "not_met": len(first) - len(met),
               "median": med, "q25": q[0], "q75": q[2]}
        for v in variants:
            s = json.load(open(f"{out}/sim-{t}-{kind}-{a}-{v}.json"))
            it = s["iterations"] * int(t) if s["time_to_target_s"] is not None else None
            row[v] = it
            row[v + "_error"] = (it / med - 1) if it and med else None
        rows.append(row)
        f = lambda e: "-" if e is None else f"{e:+.1%}"
        print(f"{t:>4} {kind + ' ' + a:>10} {med!s:>14} {q[0]!s:>6} {q[2]!s:>6} {row['not_met']:8d}"
              + "".join(f" {row[v]!s:>10} {f(row[v + '_error']):>7}" for v in variants))
def mae(v, sel=lambda r: True):
    e = [abs(r[v + "_error"]) for r in rows if sel(r) and r[v + "_error"] is not None]
    return statistics.mean(e) if e else None
summary = {v: {"all": mae(v), "loss": mae(v, lambda r: r["kind"] == "loss"), "acc": mae(v, lambda r: r["kind"] == "acc"),
               "by_tau": {t: mae(v, lambda r, t=t: r["tau"] == int(t)) for t in taus},
               "loss_by_tau": {t: mae(v, lambda r, t=t: r["tau"] == int(t) and r["kind"] == "loss") for t in taus}}
           for v in variants}
pct = lambda x: "-" if x is None else f"{x:.1%}"
for v in variants:
    print(f"mean absolute error, {v}: {pct(summary[v]['all'])}; loss targets {pct(summary[v]['loss'])} (by period: "
          + ", ".join(f"{t}: {pct(summary[v]['loss_by_tau'][t])}" for t in taus)
          + f"), accuracy targets {pct(summary[v]['acc'])}")
json.dump({"rows": rows, "fits": fits, "mean_abs_error": summary}, open(f"{out}/results.json", "w"), indent=1)
EOF
