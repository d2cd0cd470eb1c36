#!/bin/bash
# tools/convert_gavel.py and tools/convert_sailor.py: each on a committed excerpt of its source
# (tests/data/gavel-excerpt.json, tests/data/sailor-excerpt/) reproduces known values exactly,
# rejects malformed input with exit 2 without writing, and regenerates the committed profiles
# under traces/profiles for the entries the excerpt carries. Every committed profile is checked
# against the rules of the profile format (v1). The hetsim binary is not used.
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"

PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
G="$SRC/tools/convert_gavel.py"
S="$SRC/tools/convert_sailor.py"
GX="$SRC/tests/data/gavel-excerpt.json"
SX="$SRC/tests/data/sailor-excerpt"
GCOMMIT=c4fa40097339e9608ab71fd64c8bdea96a5e4a4c
SCOMMIT=cf2c8e3cc53ce178fe58a4003f46b4b6b848fc33
CREATED=2026-11-25T16:00:00Z

# conv COMMAND...: runs COMMAND with its stdout and stderr in $TMP/out and $TMP/err, its exit
# status in RUN_RC (cli-lib's `run` runs hetsim).
conv() { "$@" >"$TMP/out" 2>"$TMP/err"; RUN_RC=$?; }
# jt FILE EXPR: evaluates a Python expression over the JSON document d of FILE; exit 0 when true.
jt() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }
# step FILE BATCH: the step entry's median_s at BATCH, as repr.
step() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]));
print(repr(next(c["median_s"] for c in d["compute"] if c["phase"]=="step" and c["batch"]==int(sys.argv[2]))))' "$1" "$2"; }

# --- Gavel ------------------------------------------------------------------------------------
conv "$PY" "$G" --out "$TMP/g" --commit $GCOMMIT --created-at $CREATED "$GX"
check gavel.converts [ "$RUN_RC" -eq 0 ]
check gavel.files [ -f "$TMP/g/v100/resnet18.json" -a -f "$TMP/g/k80/resnet18.json" -a -f "$TMP/g/p100/transformer.json" ]
check gavel.only_those [ "$(find "$TMP/g" -name '*.json' | wc -l)" -eq 3 ]
# Gavel's V100 ResNet-18 at batch 64: 24.093231895382736 steps/s -> 1/that seconds per step.
check gavel.v100_resnet18_bs64 [ "$(step "$TMP/g/v100/resnet18.json" 64)" = "0.04150543207910772" ]
check gavel.inverse_exact "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]));
t=json.load(open(sys.argv[2]))["k80"]
sys.exit(0 if all(c["median_s"] == 1.0/t["(%r, 1)" % ("ResNet-18 (batch size %d)" % c["batch"])]["null"]
                  for c in d["compute"]) else 1)' "$TMP/g/k80/resnet18.json" "$GX"
check gavel.batches jt "$TMP/g/v100/resnet18.json" '[c["batch"] for c in d["compute"]] == [16,32,64,128,256] and all(c["phase"]=="step" and c["count"]==1 and c["p10_s"] is None and c["p90_s"] is None for c in d["compute"])'
check gavel.provenance jt "$TMP/g/v100/resnet18.json" 'd["source"]["repository"]=="stanford-futuredata/gavel" and d["source"]["commit"]=="'$GCOMMIT'" and "MIT" in d["source"]["licence"] and "Stanford Future Data Systems" in d["source"]["licence"] and "convert_gavel.py" in d["source"]["command"] and "published mean" in d["source"]["notes"]'
check gavel.model_zoo jt "$TMP/g/v100/resnet18.json" 'd["model"]["name"]=="resnet18" and d["model"]["params"]==11173962 and d["model"]["grad_bytes"]==44695848'
check gavel.device jt "$TMP/g/k80/resnet18.json" 'd["device"]["kind"]=="cuda" and d["device"]["compute_capability"]=="3.7" and d["execution"]=={"mode":"plain","world_size":1,"concurrent":1,"dtype":"float32","optimizer":"sgd"}'
check gavel.skips_a3c grep -q "A3C" "$TMP/err"

# malformed input: exit 2 naming the place; nothing written, an existing file left as it was
mkdir -p "$TMP/gbad/v100"; echo keep > "$TMP/gbad/v100/resnet18.json"
printf '{"v100": {"(%s, 1)": {"null": 24.0}},\n "k80": [}\n' "'ResNet-18 (batch size 64)'" > "$TMP/notjson.json"
conv "$PY" "$G" --out "$TMP/gbad" "$TMP/notjson.json"
check gavel.bad_json.exit2 [ "$RUN_RC" -eq 2 ]
check gavel.bad_json.line grep -q "notjson.json:2:" "$TMP/err"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["v100"]["(%r, 1)" % "ResNet-18 (batch size 64)"]["null"] = -3; json.dump(d, open(sys.argv[2], "w"))' "$GX" "$TMP/neg.json"
conv "$PY" "$G" --out "$TMP/gbad" "$TMP/neg.json"
check gavel.negative.exit2 [ "$RUN_RC" -eq 2 ]
check gavel.negative.path grep -qF "\$.v100[\"('ResNet-18 (batch size 64)', 1)\"].null" "$TMP/err"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["k80"]["ResNet-18 at 64"] = {"null": 7.0}; json.dump(d, open(sys.argv[2], "w"))' "$GX" "$TMP/key.json"
conv "$PY" "$G" --out "$TMP/gbad" "$TMP/key.json"
check gavel.bad_key.exit2 [ "$RUN_RC" -eq 2 ]
check gavel.bad_key.path grep -qF '$.k80["ResNet-18 at 64"]' "$TMP/err"
check gavel.bad.nothing_written [ "$(cat "$TMP/gbad/v100/resnet18.json")" = keep -a "$(find "$TMP/gbad" -type f | wc -l)" -eq 1 ]

# --- Sailor -----------------------------------------------------------------------------------
conv "$PY" "$S" --src "$SX" --out "$TMP/s" --commit $SCOMMIT --created-at $CREATED
check sailor.converts [ "$RUN_RC" -eq 0 ]
check sailor.files [ -f "$TMP/s/a100-80/opt-350m.json" -a -f "$TMP/s/rtx-3090/opt-350m.json" ]
# OPT-350 needs 21.28 GB at micro-batch 1 under Sailor's memory rule: not a V100-16.
check sailor.v100_skipped [ ! -e "$TMP/s/v100-16" ]
check sailor.v100_reason grep -q "OPT-350 on V100-16: no micro-batch fits" "$TMP/err"
# Known values: A100-80 at micro-batch 1, sum over 26 layers of forward + backward (no update
# in that profile); RTX-3090 the same plus its update time 0.004878.
check sailor.a100_80_step_mbs1 [ "$(step "$TMP/s/a100-80/opt-350m.json" 1)" = "0.2006000000000001" ]
check sailor.rtx3090_step_mbs1 [ "$(step "$TMP/s/rtx-3090/opt-350m.json" 1)" = "0.42165800000000025" ]
check sailor.sum_of_layers "$PY" -c 'import json,sys
d=json.load(open(sys.argv[1])); p=json.load(open(sys.argv[2]))
for c in d["compute"]:
    rows=[p[str(c["batch"])]["1"][str(i)] for i in range(26)]
    acc=0.0
    for f,b,u in rows: acc += (f+b)
    want={"forward": sum(r[0] for r in rows), "backward": sum(r[1] for r in rows),
          "update": rows[0][2], "step": acc + rows[0][2]}[c["phase"]]
    assert c["median_s"] == want, (c, want)' "$TMP/s/rtx-3090/opt-350m.json" "$SX/sailor/Planner/sailor_planner/profiles/OPT-350/RTX-3090/profile.json"
check sailor.oom jt "$TMP/s/a100-80/opt-350m.json" 'd["oom_batch"]==8 and [c["batch"] for c in d["compute"] if c["phase"]=="step"]==[1,2] and d["extra"]["measured_micro_batches_not_fitting"]==[8]'
check sailor.oom_3090 jt "$TMP/s/rtx-3090/opt-350m.json" 'd["oom_batch"]==2 and d["device"]["memory_bytes"]==24*2**30'
check sailor.no_update_when_zero jt "$TMP/s/a100-80/opt-350m.json" 'not any(c["phase"]=="update" for c in d["compute"])'
check sailor.model jt "$TMP/s/a100-80/opt-350m.json" 'd["model"]["name"]=="opt-350m" and d["model"]["params"]==407431168 and d["model"]["grad_bytes"]==4*407431168 and d["model"]["flops_per_sample"] is None'
check sailor.provenance jt "$TMP/s/a100-80/opt-350m.json" 'd["source"]["repository"]=="eth-easl/sailor" and d["source"]["commit"]=="'$SCOMMIT'" and "ETH Zurich" in d["source"]["licence"] and d["source"]["file"].endswith("OPT-350/A100-80/profile.json")'

# the network fits as lines: A100-80 with 4 GPUs per node, between nodes
conv "$PY" "$S" --src "$SX" --network --json
cp "$TMP/out" "$TMP/net.json"
check sailor.network.runs [ "$RUN_RC" -eq 0 ]
check sailor.network.line jt "$TMP/net.json" 'all(abs(r["latency_s"] + x/r["bandwidth_bytes_per_s"] - (x/1e9)/sum(c*__import__("math").log2(x/1e6)**(2-i) for i,c in enumerate(r["coefficients"])))/r[k] < 1e-9 for r in d for x,k in ((2**20,"time_1MiB_s"),(2**30,"time_1GiB_s")))'
check sailor.network.a100 jt "$TMP/net.json" 'any(r["scope"]=="inter" and r["gpu"]=="A100-80" and r["gpus_per_node"]=="4" and abs(r["bandwidth_bytes_per_s"]/12.0762e9-1) < 1e-4 for r in d)'

# malformed: a layer that is not [forward, backward, update]; nothing written
cp -r "$SX" "$TMP/sbad"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d["2"]["1"]["7"]=[0.1, "x", 0.0]; json.dump(d, open(sys.argv[1], "w"))' "$TMP/sbad/sailor/Planner/sailor_planner/profiles/OPT-350/RTX-3090/profile.json"
conv "$PY" "$S" --src "$TMP/sbad" --out "$TMP/sout"
check sailor.bad_layer.exit2 [ "$RUN_RC" -eq 2 ]
check sailor.bad_layer.path grep -qF 'OPT-350/RTX-3090/profile.json: $["2"]["1"]["7"]' "$TMP/err"
check sailor.bad_layer.nothing_written [ ! -e "$TMP/sout" ]
sed -i 's/GPU_MEMORY_GB = {/GPU_MEMORY_GB = {"x": -1, /' "$TMP/sbad/sailor/Planner/simulations/constants.py"
conv "$PY" "$S" --src "$TMP/sbad" --out "$TMP/sout"
check sailor.bad_memory.exit2 [ "$RUN_RC" -eq 2 ]
conv "$PY" "$S" --src "$SX"
check sailor.usage.exit2 [ "$RUN_RC" -eq 2 ]

# --- the committed profiles are what the converters write -------------------------------------
# For every profile written from an excerpt: the committed file of the same card and model has
# the same device, model, execution, oom_batch and, for every entry the excerpt gave, the same
# values; and its provenance names the source commit.
same() {
  "$PY" -c 'import json,sys
new=json.load(open(sys.argv[1])); old=json.load(open(sys.argv[2]))
for k in ("format","version","tool","device","model","execution","oom_batch"):
    assert new[k]==old[k], k
assert new["source"]["commit"]==old["source"]["commit"] and new["source"]["file"]==old["source"]["file"]
assert new["source"]["notes"]==old["source"]["notes"] or sys.argv[3]=="gavel"
key=lambda c: (c["batch"], c["phase"])
have={key(c): c for c in old["compute"]}
for c in new["compute"]:
    assert have.get(key(c)) == c, c' "$1" "$2" "$3"
}
for f in $(cd "$TMP/g" && find . -name '*.json' | sort); do
  check "committed.gavel.${f#./}" same "$TMP/g/$f" "$SRC/traces/profiles/$f" gavel
done
for f in $(cd "$TMP/s" && find . -name '*.json' | sort); do
  check "committed.sailor.${f#./}" same "$TMP/s/$f" "$SRC/traces/profiles/$f" sailor
done

# --- every committed profile keeps the format's rules -------------------------------------------
check committed.licences [ -s "$SRC/traces/profiles/LICENSE.gavel" -a -s "$SRC/traces/profiles/LICENSE.sailor" ]
check committed.format "$PY" - "$SRC/traces/profiles" <<'EOF'
import glob, json, math, os, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "*", "*.json")))
assert len(files) >= 17, len(files)
num = lambda x: not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
for f in files:
    d = json.load(open(f))
    top = {"format", "version", "created_at", "tool", "source", "device", "model", "execution",
           "compute", "oom_batch", "comm", "extra"}
    assert set(d) <= top, (f, set(d) - top)
    assert d["format"] == "hetsim-profile" and d["version"] == 1, f
    s = d["source"]
    assert all(s.get(k) for k in ("repository", "commit", "file", "licence", "notes", "command")), f
    assert len(s["commit"]) == 40 and "MIT" in s["licence"], f
    dev = d["device"]
    assert dev["name"] and dev["kind"] == "cuda", f
    assert dev["memory_bytes"] is None or (isinstance(dev["memory_bytes"], int) and dev["memory_bytes"] > 0), f
    assert dev["sm_count"] is None or (isinstance(dev["sm_count"], int) and dev["sm_count"] > 0), f
    m = d["model"]
    assert m["name"] == os.path.basename(f)[:-5], f
    assert isinstance(m["params"], int) and m["params"] > 0, f
    assert isinstance(m["grad_bytes"], int) and m["grad_bytes"] > 0, f
    assert m["flops_per_sample"] is None or (num(m["flops_per_sample"]) and m["flops_per_sample"] > 0), f
    assert d["execution"]["mode"] == "plain" and d["execution"]["world_size"] == 1, f
    steps = [c for c in d["compute"] if c["phase"] == "step"]
    assert steps, f
    for c in d["compute"]:
        assert c["phase"] in ("forward", "backward", "update", "step"), f
        assert isinstance(c["batch"], int) and c["batch"] > 0, f
        assert num(c["median_s"]) and c["median_s"] > 0 and c["count"] > 0, f
        if d["oom_batch"] is not None:
            assert c["batch"] < d["oom_batch"], f
print(len(files), "profiles")
EOF
# one device name per card folder, different between folders (compute: {calib: NAME} takes it)
check committed.device_names "$PY" -c 'import glob,json,os,sys
by={}
for f in glob.glob(os.path.join(sys.argv[1],"*","*.json")):
    by.setdefault(os.path.basename(os.path.dirname(f)), set()).add(json.load(open(f))["device"]["name"])
names=[n for s in by.values() for n in s]
sys.exit(0 if all(len(s)==1 for s in by.values()) and len(names)==len(set(names)) else 1)' "$SRC/traces/profiles"

cli_finish
