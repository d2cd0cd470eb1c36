#!/usr/bin/env bash
# Ten rounds, each: tools/hetsim_profile.py (ddp, 2 concurrent, fresh processes per batch) at
# 128,169,192,256,343,384, then bench/ddp_train.py with lbb-like batches 343,169 and rank 1 slowed
# 2x by sleeping; prints per round the profile (fwd+bwd and step medians, ms), its linear
# interpolation at 169 and 343, and DDP's per-rank median own compute and mean iteration.
# usage: bash notebooks-data/ddp-cpu-noise/exact169.sh [OUTDIR] > exact169.jsonl
set -eu
cd "$(dirname "$0")/../.."; O=${1:-/tmp/exact169}; mkdir -p "$O"
for r in $(seq 1 10); do
/usr/bin/python3 tools/hetsim_profile.py --model cnn --device cpu --ddp --concurrent 2 --batches 128,169,192,256,343,384 --budget 2 --device-name cpu-ddp --quiet --out $O/prof$r.json
/usr/bin/python3 bench/ddp_train.py --model cnn --batches 343,169 --iterations 40 --warmup 5 --slowdown 1:2 --slow-mode sleep --quiet --out $O/lbb$r.json
/usr/bin/python3 - $O $r <<'PY'
import json,sys,statistics
O,r=sys.argv[1:]
prof=json.load(open(f"{O}/prof{r}.json"))
fb={}
for e in prof["compute"]:
    if e["phase"] in ("forward","backward"): fb[e["batch"]]=fb.get(e["batch"],0)+e["median_s"]*1e3
st={e["batch"]:e["median_s"]*1e3 for e in prof["compute"] if e["phase"]=="step"}
d=json.load(open(f"{O}/lbb{r}.json"))
rows=[x for x in d["rows"] if not x["warmup"]]
own={rk: statistics.median(x["forward_s"]+x["backward_s"]-x["comm_tail_s"] for x in rows if x["rank"]==rk)*1e3 for rk in (0,1)}
i169=fb[128]+(169-128)/64*(fb[192]-fb[128]); i343=fb[320] if 320 in fb else fb[256]+(343-256)/128*(fb[384]-fb[256])
print(json.dumps({"round": int(r), "fb": {k: round(v,2) for k,v in fb.items()}, "step": {k: round(v,2) for k,v in st.items()}, "interp169": round(i169,2), "interp343": round(i343,2), "ddp_rank0_343": round(own[0],2), "ddp_rank1_169": round(own[1],2), "iter": round(d["summary"]["mean_iteration_s"]*1e3,2)}))
PY
done
