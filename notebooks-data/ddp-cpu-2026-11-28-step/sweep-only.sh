#!/usr/bin/env bash
# The same passes predicted the old way: each pass's profile imported without its allreduce_step
# entry, so that the simulated link charges the sweep's all-reduce at the gradient's size (after
# a barrier), as bench_ddp.sh did before 2026-11-28; the homogeneous, slowed and lbb_static
# cases simulated as the bench does (40 iterations, global batch 512, lbb_static's batches from
# lbb:dynamic=0) and scored against the DDP runs of the pass. Prints per pass and case the error
# with the step entry (the bench's, from sim.json) and without it, and the medians.
# Usage (repository root): bash notebooks-data/ddp-cpu-2026-11-28-step/sweep-only.sh HETSIM TMPDIR [RUNDIR]
# (RUNDIR: the bench's folder of passes; default this one)
set -euo pipefail
H=$(readlink -f "${1:?usage: sweep-only.sh HETSIM TMPDIR [RUNDIR]}"); T=${2:?usage: sweep-only.sh HETSIM TMPDIR [RUNDIR]}
D=$(cd "${3:-$(dirname "$0")}" && pwd)
mkdir -p "$T"
PY=/usr/bin/python3
for k in $(seq 1 20); do
  P=$T/p$k; mkdir -p "$P"; rm -f "$P"/*.db*
  "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["comm"]=[e for e in d["comm"] if e["op"]!="allreduce_step"]; json.dump(d,open(sys.argv[2],"w"))' \
    "$D/pass$k/profile.json" "$P/profile.json"
  "$H" calib import "$P/profile.json" --db "$P/cal.db" --json >"$P/import.json"
  DEV=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["imports"][0]["device"])' "$P/import.json")
  for s in 1 2; do
    cat >"$P/c$s.yaml" <<YAML
name: ddp-cpu
device_types:
  c: {compute: {cnn: {calib: "$DEV"}}}
nodes:
  - {name: n0, link: {calib: "$DEV"}, devices: [{type: c}, {type: c, slowdown: $s}]}
jitter: {calib: "$DEV"}
YAML
  done
  sim() { "$H" sim --cluster "$P/$1" --model cnn --policy "$2" --global-batch 512 --iterations 40 \
    --calib "$P/cal.db" --db "$P/s.db" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["mean_iteration_s"])'; }
  echo "$k $(sim c1.yaml ssgd) $(sim c2.yaml ssgd) $(sim c2.yaml lbb:dynamic=0)"
done >"$T/sweep.txt"
"$PY" - "$D" "$T/sweep.txt" <<'PY'
import gzip, json, statistics as st, sys
d, rows = sys.argv[1], [l.split() for l in open(sys.argv[2])]
cases = ("homo", "slow", "lbb_static")
new, old = {c: [] for c in cases}, {c: [] for c in cases}
print("pass case        ddp_ms  step_err  sweep_err")
for r in rows:
    k = int(r[0])
    sim = json.load(open(f"{d}/pass{k}/sim.json"))
    for c, v in zip(cases, r[1:]):
        ddp = json.load(gzip.open(f"{d}/pass{k}/{c}.json.gz", "rt"))["summary"]["mean_iteration_s"]
        new[c].append(sim[c] / ddp - 1)
        old[c].append(float(v) / ddp - 1)
        print(f"{k:>4} {c:<10} {ddp * 1e3:7.2f}  {new[c][-1]:+.3f}    {old[c][-1]:+.3f}")
for c in cases:
    print(f"median {c:<10} with allreduce_step {st.median(new[c]):+.3f}, sweep only {st.median(old[c]):+.3f}")
PY
