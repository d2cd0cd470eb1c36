#!/usr/bin/env bash
# The check of hetsim's predictions against real PyTorch DistributedDataParallel (issue 15 §4,
# docs/performance.md "Against PyTorch DDP"): a user's whole path on this machine's CPU.
#
#   bash bench/bench_ddp.sh HETSIM [OUTDIR]
#
# 1. profile MODEL with tools/hetsim_profile.py the way the run executes: wrapped in DDP at world
#    size 1, two processes stepping at once (each pinned to its own CPU, one thread), gloo's
#    all-reduce and p2p between two processes, and the gradient's all-reduce as DDP issues it
#    after each step at BATCH (--comm-step: its mean is what the simulated link charges at the
#    gradient's size; an all-reduce timed alone after a barrier took a tenth of it here);
# 2. `hetsim calib import` it, and write the cluster: two workers on one node whose compute,
#    link and step noise come from the import (compute {MODEL: {calib: DEVICE}}, link {calib:
#    DEVICE}, jitter {calib: DEVICE}: each iteration waits for the slower of two noisy ranks);
# 3. for each case, run real DDP (bench/ddp_train.py: gloo, two pinned single-thread processes)
#    and simulate the same model, batches and iterations, and compare the mean iteration times:
#    - homo: both ranks at BATCH;
#    - slow: rank 1 slowed SLOW times (hetsim: a static `slowdown: SLOW` on worker 1's device, so
#      that LBB's warm-up profile sees it, as LBB's own warm-up on a slower device would; an
#      event at 0 s came after the warm-up and left LBB starting from even batches); DDP
#      emulates the slower device by SLOW_MODE (ddp_train --slow-mode): repeat (the default
#      since 2026-11-26) computes SLOW-1 extra forward+backward passes (under no_sync), so the
#      rank keeps its CPU busy SLOW times as long, as a slower device stays busy and as the
#      simulation assumes; sleep first sleeps (SLOW-1) x its previous compute, leaving its
#      partner alone on the machine for that long, where it computes about 8% faster than
#      beside a busy one: docs/performance.md has both;
#    - lbb:  the slow cluster under hetsim's lbb for 3 x ITER iterations; DDP then runs the batches
#      lbb holds at the end, and its mean iteration is compared with the mean of lbb's last 5
#      simulated iterations (lbb starts from its static solve and keeps tuning on noisy step
#      times, while DDP runs the batches it ends with from its first iteration). LBB's own
#      target is the DDP ranks' compute spread (max - min) / mean under those batches;
#    - lbb_smooth: the same under lbb:smooth=8 (decisions from 8-iteration medians);
#    - lbb_static: the batches of LBB's static solve alone (lbb:dynamic=0).
# The whole of 1-3 is one pass; REPEATS passes run one after another (default 3), each with its
# own profile, so that a profile is compared with DDP runs made the same minute (this VM's speed
# drifts by tens of percent between minutes: docs/performance.md). Prints each pass's errors and
# the median over the passes per case, and writes OUTDIR/results.json. Settings (environment):
# MODEL (cnn), BATCH (256 per rank), ITER (40 timed iterations), WARMUP (5), SLOW (2; a whole
# number with SLOW_MODE repeat), SLOW_MODE (repeat or sleep), REPEATS,
# BUDGET (2 s of timed steps per batch size in the profile), HUGEPAGES (1: glibc.malloc.hugetlb=1
# in every process, see below; 0: the allocator's default), ROUNDS (2: each batch size timed in
# that many rounds of fresh process pairs, pooled: hetsim_profile.py --rounds), PROFILE_BATCHES
# (default B/8, B/4, B/2, 3B/4, B, 5B/4, 3B/2: what lbb may give a worker, and small batches for
# the fixed cost), QUICK=1 (CI: one pass, tiny batches and iterations; checks that the path
# runs, not the numbers), SUMMARY_ONLY=1 (no new pass: the summary of those in OUTDIR).
# The summary gives each case's median over the passes with its distribution-free 95% interval
# (order statistics; at 5 passes only the extremes, a 93.75% interval): a pass's error moves by
# tens of percent on this VM, so a target of a few percent needs tens of passes.
# Needs /usr/bin/python3 with torch (Debian's python3-torch), or HETSIM_TORCH_PYTHON naming another
# interpreter with torch (2.x, say). Quiet machine for the figures.
set -euo pipefail
H=$(readlink -f "${1:?usage: bench_ddp.sh HETSIM [OUTDIR]}")
OUT=${2:-$(mktemp -d "${TMPDIR:-/tmp}/hetsim-ddp.XXXXXX")}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${HETSIM_TORCH_PYTHON:-/usr/bin/python3}
MODEL=${MODEL:-cnn}
if [ "${QUICK:-0}" = 1 ]; then
  BATCH=${BATCH:-16}; ITER=${ITER:-3}; WARMUP=${WARMUP:-1}; BUDGET=${BUDGET:-0.05}
  PROFILE_BATCHES=${PROFILE_BATCHES:-4,8,16,24,32}; REPEATS=${REPEATS:-1}; ROUNDS=${ROUNDS:-1}
else
  BATCH=${BATCH:-256}; ITER=${ITER:-40}; WARMUP=${WARMUP:-5}; BUDGET=${BUDGET:-2}
fi
SLOW=${SLOW:-2}
SLOW_MODE=${SLOW_MODE:-repeat}
case $SLOW_MODE in
  repeat) [[ $SLOW =~ ^[1-9][0-9]*$ ]] || { echo "bench_ddp.sh: SLOW_MODE repeat takes a whole SLOW, got $SLOW" >&2; exit 2; } ;;
  sleep) ;;
  *) echo "bench_ddp.sh: SLOW_MODE is repeat or sleep, got $SLOW_MODE" >&2; exit 2 ;;
esac
REPEATS=${REPEATS:-3}
ROUNDS=${ROUNDS:-2}
# From B/8 up: LBB's warm-up reads the fit at batches 1 to 256 and its solve rests on the fixed
# cost t(0). A line through profiles of B/2 to 3B/2 alone put it anywhere between -16 and +11 ms
# over the 20 passes of 2026-11-26, and a fit extrapolated that far gave a worker slowed 2x 24
# and 30 of 512 samples in two of them.
PROFILE_BATCHES=${PROFILE_BATCHES:-$((BATCH / 8)),$((BATCH / 4)),$((BATCH / 2)),$((3 * BATCH / 4)),$BATCH,$((5 * BATCH / 4)),$((3 * BATCH / 2))}
log() { echo "bench_ddp: $*" >&2; }
# Transparent huge pages for glibc malloc's mmap'd chunks (which hold torch's tensors), in the
# profile's processes and DDP's ranks alike. With the default allocator about one fresh torch
# process in eight on this VM stepped cnn 1.6-1.8x slower for its whole life (8 of 60 at 169
# samples; with hugetlb=1, 0 of 60: notebooks-data/cpu-process-modes-2026-11-26). HUGEPAGES=0:
# the allocator's default.
if [ "${HUGEPAGES:-1}" = 1 ]; then
  export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
fi

one_pass() { # one_pass DIR: profile, import, cluster, simulate and run DDP; DIR/sim.json
local P=$1
mkdir -p "$P"
# 1. The profile.
log "profiling $MODEL (ddp, 2 concurrent, $ROUNDS rounds, gloo comm, DDP's all-reduce at $BATCH) at batches $PROFILE_BATCHES"
"$PY" "$SRC/tools/hetsim_profile.py" --model "$MODEL" --device cpu --ddp --concurrent 2 \
  --rounds "$ROUNDS" --batches "$PROFILE_BATCHES" --budget "$BUDGET" --comm --comm-world 2 --comm-budget "$BUDGET" \
  --comm-step "$BATCH" \
  --device-name "cpu-ddp" --quiet --out "$P/profile.json"
# 2. Import, and the cluster.
rm -f "$P/cal.db"
"$H" calib import "$P/profile.json" --db "$P/cal.db" --json >"$P/import.json"
DEV=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; d=d.get("imports",[d])[0] if "imports" in d else d; print(d["device"])' "$P/import.json")
cluster() { # cluster FILE SLOWDOWN
  cat >"$1" <<YAML
# bench/bench_ddp.sh: two workers of this CPU (one thread each), compute and link measured by
# tools/hetsim_profile.py and imported ($P/profile.json).
name: ddp-cpu
device_types:
  c: {compute: {$MODEL: {calib: "$DEV"}}}
nodes:
  - {name: n0, link: {calib: "$DEV"}, devices: [{type: c}, {type: c, slowdown: $2}]}
jitter: {calib: "$DEV"}
YAML
}
cluster "$P/homo.yaml" 1
cluster "$P/slow.yaml" "$SLOW"

sim_mean() { # sim_mean CLUSTER POLICY DB -> prints mean_iteration_s
  "$H" sim --cluster "$1" --model "$MODEL" --policy "$2" --global-batch $((2 * BATCH)) \
    --iterations "$ITER" --calib "$P/cal.db" --db "$3" --json |
    "$PY" -c 'import json,sys; print(json.load(sys.stdin)["mean_iteration_s"])'
}
ddp_run() { # ddp_run NAME BATCHES SLOWDOWN -> P/NAME.json
  "$PY" "$SRC/bench/ddp_train.py" --model "$MODEL" --batches "$2" --iterations "$ITER" \
    --warmup "$WARMUP" --slowdown "1:$3" --slow-mode "$SLOW_MODE" --quiet --out "$P/$1.json"
}

rm -f "$P/sim.db"
log "case homo: batches $BATCH,$BATCH"
ddp_run homo "$BATCH,$BATCH" 1
s_homo=$(sim_mean "$P/homo.yaml" ssgd "$P/sim.db")
log "case slow: worker 1 slowed ${SLOW}x ($SLOW_MODE)"
ddp_run slow "$BATCH,$BATCH" "$SLOW"
s_slow=$(sim_mean "$P/slow.yaml" ssgd "$P/sim.db")
# lbb starts from its static solve, then fine-tunes one sample at a time and re-solves at most
# every 30 iterations from the noisy step times. DDP runs the batches it ends with from the
# start: they are compared with the last 5 iterations of a 3x longer lbb run (the batches it
# holds at the end, the mean interval between its last 6 all-reduce ends).
lbb_tuned() { # lbb_tuned NAME POLICY: simulates, runs DDP on the batches it ends with; sets s_NAME, NAME_B
  "$H" sim --cluster "$P/slow.yaml" --model "$MODEL" --policy "$2" --global-batch $((2 * BATCH)) \
    --iterations $((3 * ITER)) --calib "$P/cal.db" --db "$P/$1.db" --store steps --json >/dev/null
  local b t
  read -r b t < <("$PY" - "$P/$1.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
last = c.execute("SELECT max(step) FROM step").fetchone()[0]
batches = [b for (b,) in c.execute("SELECT batch FROM step WHERE step = ? ORDER BY worker", (last,))]
ends = [e for (e,) in c.execute("SELECT max(comm_end_s) FROM step GROUP BY step ORDER BY step")]
tail = ends[-6:]
print(",".join(map(str, batches)), (tail[-1] - tail[0]) / (len(tail) - 1))
PY
  )
  printf -v "s_$1" '%s' "$t"
  printf -v "$1_B" '%s' "$b"
  log "case $1: batches $b (worker 1 slowed ${SLOW}x; $2)"
  ddp_run "$1" "$b" "$SLOW"
}
lbb_tuned lbb lbb
# lbb_smooth: the same with lbb:smooth=8 (docs/policies.md): decisions from each worker's
# median relative step time over 8 iterations at unchanged batches, not from single steps.
lbb_tuned lbb_smooth lbb:smooth=8
# lbb_static: the batches of LBB's static solve alone (lbb:dynamic=0), from its warm-up profile
# of the calibrated model: what hetsim's model of the two workers balances, before LBB's tuning
# follows the noise of single steps.
"$H" sim --cluster "$P/slow.yaml" --model "$MODEL" --policy lbb:dynamic=0 --global-batch $((2 * BATCH)) \
  --iterations "$ITER" --calib "$P/cal.db" --db "$P/lbb_static.db" --store steps --json >"$P/lbb_static_sim.json"
LBBS=$("$PY" -c '
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(",".join(str(b) for (b,) in c.execute("SELECT batch FROM step WHERE step = 0 ORDER BY worker")))' "$P/lbb_static.db")
s_lbbs=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["mean_iteration_s"])' "$P/lbb_static_sim.json")
log "case lbb_static: batches $LBBS (worker 1 slowed ${SLOW}x)"
ddp_run lbb_static "$LBBS" "$SLOW"
printf '{"homo": %s, "slow": %s, "lbb": %s, "lbb_batches": [%s], "lbb_static": %s, "lbb_static_batches": [%s], "lbb_smooth": %s, "lbb_smooth_batches": [%s], "glibc_tunables": "%s"}\n' \
  "$s_homo" "$s_slow" "$s_lbb" "$lbb_B" "$s_lbbs" "$LBBS" "$s_lbb_smooth" "$lbb_smooth_B" "${GLIBC_TUNABLES:-}" >"$P/sim.json"
}

if [ "${SUMMARY_ONLY:-0}" = 1 ]; then
  # Only the summary, of the passes OUTDIR already holds (pass1, pass2, ...).
  REPEATS=0
  while [ -f "$OUT/pass$((REPEATS + 1))/sim.json" ]; do REPEATS=$((REPEATS + 1)); done
  [ "$REPEATS" -gt 0 ] || { echo "bench_ddp.sh: SUMMARY_ONLY=1: no pass1/sim.json in $OUT" >&2; exit 2; }
else
  for k in $(seq 1 "$REPEATS"); do
    log "pass $k of $REPEATS"
    one_pass "$OUT/pass$k"
  done
fi

"$PY" - "$OUT" "$REPEATS" "$MODEL" "$BATCH" "$SLOW" "$SLOW_MODE" <<'PY'
import gzip, json, os, statistics, sys
from math import comb


def load(path):
    """A pass's JSON, or its .json.gz (the committed folders under notebooks-data/ are gzipped)."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        return json.load(gzip.open(path + ".gz", "rt"))
    return json.load(open(path))


def median_ci(xs, level=0.95):
    """The distribution-free interval of the median of xs: [x_(k), x_(n-k+1)] for the largest k
    with P(Binomial(n, 1/2) < k) <= (1 - level) / 2, and its coverage (the extremes, with theirs,
    when n is too small for the level: 93.75% at 5 passes)."""
    x, n = sorted(xs), len(xs)
    k, below = 0, 0.0
    while below + comb(n, k) / 2 ** n <= (1 - level) / 2:
        below += comb(n, k) / 2 ** n
        k += 1
    k = max(k, 1)
    return x[k - 1], x[n - k], 1 - 2 * sum(comb(n, i) for i in range(k)) / 2 ** n


out, reps, model, batch, slow, slow_mode = sys.argv[1:]
reps = int(reps)
res = {"model": model, "batch_per_rank": int(batch), "slowdown": float(slow), "slow_mode": slow_mode,
       "repeats": reps,
       # GLIBC_TUNABLES of each pass (HUGEPAGES), null for passes made before it was recorded
       "glibc_tunables": sorted({json.load(open(f"{out}/pass{k}/sim.json")).get("glibc_tunables")
                                 for k in range(1, reps + 1)}, key=str),
       "passes": [], "cases": {}}
print(f"{'pass':4} {'case':10} {'ddp_ms':>9} {'sim_ms':>9} {'error':>8} {'ddp_compute_spread':>19}  batches")
# lbb_static and lbb_smooth came later (2026-11-26): folders of earlier passes lack them.
names = [n for n in ("homo", "slow", "lbb_static", "lbb", "lbb_smooth")
         if all(n in json.load(open(f"{out}/pass{k}/sim.json")) for k in range(1, reps + 1))]
for k in range(1, reps + 1):
    p = f"{out}/pass{k}"
    sim = json.load(open(f"{p}/sim.json"))
    row = {"lbb_batches": sim["lbb_batches"], "cases": {}}
    for extra in ("lbb_static", "lbb_smooth"):
        if extra in names:
            row[extra + "_batches"] = sim[extra + "_batches"]
    for name in names:
        s = load(f"{p}/{name}.json")["summary"]
        m, spread, t = s["mean_iteration_s"], s["compute_spread"], float(sim[name])
        row["cases"][name] = {"ddp_mean_iteration_s": m, "sim_mean_iteration_s": t,
                              "error": t / m - 1, "ddp_compute_spread": spread}
        b = ",".join(map(str, sim[name + "_batches"])) if name.startswith("lbb") else f"{batch},{batch}"
        print(f"{k:4} {name:10} {m*1e3:9.2f} {t*1e3:9.2f} {t/m-1:+8.3f} {spread:19.3f}  {b}")
    res["passes"].append(row)
for name in names:
    errs = [r["cases"][name]["error"] for r in res["passes"]]
    spreads = [r["cases"][name]["ddp_compute_spread"] for r in res["passes"]]
    lo, hi, cover = median_ci(errs)
    slo, shi, _ = median_ci(spreads)
    res["cases"][name] = {"median_error": statistics.median(errs), "errors": errs,
                          "median_error_interval": [lo, hi], "interval_coverage": cover,
                          "median_ddp_compute_spread": statistics.median(spreads),
                          "median_ddp_compute_spread_interval": [slo, shi],
                          # the last pass's figures, for a quick look
                          **res["passes"][-1]["cases"][name]}
    print(f"median {name:10} error {statistics.median(errs):+.3f} ({cover:.1%} interval of the median "
          f"{lo:+.3f} to {hi:+.3f}; passes: {', '.join(f'{e:+.3f}' for e in errs)}); DDP compute spread "
          f"{statistics.median(spreads):.3f} ({slo:.3f} to {shi:.3f})")
res["lbb_batches"] = res["passes"][-1]["lbb_batches"]
for extra in ("lbb_static", "lbb_smooth"):
    if extra in names:
        res[extra + "_batches"] = res["passes"][-1][extra + "_batches"]
json.dump(res, open(f"{out}/results.json", "w"), indent=1)
print(f"results: {out}/results.json")
PY
