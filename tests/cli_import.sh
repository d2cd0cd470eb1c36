#!/usr/bin/env bash
# hetsim calib import end to end: profiles of tests/data/ into a database, the listings
# (`hetsim devices`, `hetsim models --db`), a simulation of the imported model outside the zoo,
# the same files again (nothing changes), and bad input: exit 2 with the JSON path, nothing
# stored, not even a database file.
# usage: cli_import.sh HETSIM_BINARY SOURCE_DIR
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX="import."
cd "$TMP" || exit 1
DB=$TMP/imp.db
good=$SRC/tests/data/profile-tinynet.json
mlp=$SRC/tests/data/profile-mlp-2workers.json
# fingerprint: every table an import writes, counted, with the largest ids.
fingerprint() {
  q "SELECT (SELECT count(*) FROM device), (SELECT count(*) FROM model), (SELECT count(*) FROM calib_sample),
     (SELECT count(*) FROM perf_model), (SELECT count(*) FROM comm_sample), (SELECT count(*) FROM comm_model),
     (SELECT max(id) FROM perf_model), (SELECT max(id) FROM comm_model)"
}

# Usage and help.
run help 0 calib import --help && check help-text has out "usage: hetsim calib import FILE..."
run calib-help 0 calib --help && check calib-help-names-import has out "hetsim calib import FILE..."
expect_exit no-file 2 "$HETSIM" calib import --db "$DB"
check no-file-msg has err "no profile given"
expect_exit bad-option 2 "$HETSIM" calib import "$good" --db "$DB" --frobnicate
check no-db-on-usage test ! -e "$DB"

# Two profiles at once: a model outside the zoo, and mlp measured by 2 processes at once.
run import 0 calib import "$good" "$mlp" --db "$DB" || cat "$TMP/err"
check import-text-tinynet has out "device 1 \"Test GPU T1\", model tinynet (imported, added): 7 samples at 4 batch sizes"
check import-text-mlp has out "device 2 \"Test CPU C1 (2 workers)\", model mlp (zoo, added)"
check import-text-comm has out "comm gloo allreduce (world 2): alpha"
check device-rows test "$(q "SELECT count(*) FROM device WHERE source LIKE 'profile %'")" = 2
check model-row test "$(q "SELECT params || ',' || grad_bytes FROM model WHERE name = 'tinynet' AND source IS NOT NULL")" = "1000000,4000000"
check step-fits test "$(q "SELECT count(*) FROM perf_model WHERE phase = 'step' AND chosen = 1")" = 2
check max-batch test "$(q "SELECT max_batch FROM perf_model WHERE phase = 'step' AND chosen = 1 AND model = 'tinynet'")" = 64
before=$(fingerprint)

# Again, as JSON: nothing changes.
run again 0 calib import "$good" "$mlp" --db "$DB" --json
check again-json test "$(grep -c '"status": "unchanged"' "$TMP/out")" = 2
check again-valid-json /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [i["status"] for i in d["imports"]] == ["unchanged"]*2' "$TMP/out"
check again-unchanged test "$(fingerprint)" = "$before"

# The listings say where the numbers come from.
run devices 0 devices --db "$DB"
check devices-source has out "profile "
check devices-tinynet has out "tinynet    linear"
run devices-json 0 devices --db "$DB" --json
check devices-json-source /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert all(r["source"].startswith("profile ") for r in d), d' "$TMP/out"
run models 0 models --db "$DB"
check models-tinynet has out "tinynet      -                   1000000        4000000"
check models-zoo-source has out "zoo (nn/nn_zoo.c)"
run models-json 0 models --db "$DB" --json
check models-json /usr/bin/python3 -c 'import json,sys; d={m["name"]: m for m in json.load(open(sys.argv[1]))}; t=d["tinynet"]; assert t["train_flops_per_sample"] == 6e6 and t["dataset"] is None and d["mlp"]["source"] == "zoo", t' "$TMP/out"
run models-plain 0 models
check models-plain-no-source test "$(grep -c source "$TMP/out")" = 0
expect_exit models-missing-db 2 "$HETSIM" models --db "$TMP/none.db"

# The imported model simulates: one worker at an imported batch size takes that batch's
# measured step median per iteration.
cat > one.yaml <<'YAML'
name: one
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  t1: {memory: 16GiB, compute: {calib: "Test GPU T1"}}
nodes:
  - name: n0
    devices: [{type: t1}]
YAML
run sim 0 sim --cluster one.yaml --model tinynet --policy ssgd --global-batch 32 --iterations 5 --calib "$DB" --db runs.db --json
check sim-measured-median /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert abs(d["mean_iteration_s"] - 0.0052) < 1e-12, d' "$TMP/out"
run sim-unknown 2 sim --cluster one.yaml --model nosuch --policy ssgd --global-batch 32 --iterations 5 --calib "$DB" --db runs.db
check sim-unknown-lists-both has err "unknown model \"nosuch\"; valid: mlp, cnn, resnet18, vgg16, mobilenetv2 (the zoo), and the models imported into $DB: tinynet"
run sim-epochs 2 sim --cluster one.yaml --model tinynet --policy ssgd --global-batch 32 --epochs 1 --calib "$DB" --db runs.db
check sim-epochs-msg has err "tinynet is an imported model"
run sim-proxy 2 sim --cluster one.yaml --model tinynet --policy ssgd --global-batch 32 --iterations 2 --convergence proxy --calib "$DB" --db runs.db
run real-imported 2 real --model tinynet --policy ssgd --global-batch 32 --iterations 2 --db runs.db
check sim-rejections-stored-nothing test "$(sqlite3 runs.db 'SELECT count(*) FROM run')" = 1

# Bad documents: exit 2, the JSON path, nothing stored.
sed 's/"median_s": 0.0036/"median_s": -0.0036/' "$good" > neg.json
run negative 2 calib import "$mlp" neg.json --db "$DB"
check negative-path has err "neg.json: \$.compute[1].median_s: expected a positive number of seconds, got -0.0036"
check negative-nothing has err "nothing was stored"
sed 's/"version": 1/"version": 2/' "$good" > v2.json
run version 2 calib import v2.json --db "$DB"
check version-path has err "v2.json: \$.version: expected 1"
sed 's/"tool": "hand-written test profile",//' "$good" > notool.json
run missing 2 calib import notool.json --db "$DB"
check missing-path has err "notool.json: \$.tool: missing (required)"
sed 's/"median_s": 0.0052/"median_s": "5.2ms"/' "$good" > unit.json
run unit 2 calib import unit.json --db "$DB"
check unit-path has err "unit.json: \$.compute[2].median_s: expected a positive number of seconds, got \"5.2ms\""
printf '{"format": "hetsim-profile",\n  "version": 1,,}\n' > syntax.json
run syntax 2 calib import syntax.json --db "$DB"
check syntax-line-col has err "syntax.json:2:16: expected a key in double quotes"
run unreadable 2 calib import "$TMP/nonexistent.json" --db "$DB"
check unreadable-msg has err "nonexistent.json: cannot open"
# A second profile of "tinynet" that contradicts the first (another network, same name): only
# the database knows; the good file before it is rolled back too.
sed -e 's/"params": 1000000/"params": 999999/' -e 's/Test GPU T1/Test GPU T9/' "$good" > other.json
sed -e 's/Test GPU T1/Test GPU T8/' "$good" > t8.json
run contradiction 2 calib import t8.json other.json --db "$DB"
check contradiction-path has err "other.json: \$.model.params: expected 1000000, the parameters of the model \"tinynet\" already in"
check bad-stored-nothing test "$(fingerprint)" = "$before"
run fresh-bad 2 calib import neg.json --db "$TMP/fresh.db"
check fresh-bad-no-db-file test ! -e "$TMP/fresh.db"

# --as renames the device; a name too long is refused.
run as 0 calib import "$good" --as "My T1" --db "$DB"
check as-device test "$(q "SELECT count(*) FROM device WHERE name = 'My T1'")" = 1
long=$(printf 'x%.0s' $(seq 1 101))
run as-long 2 calib import "$good" --as "$long" --db "$DB"

# The gradient's all-reduce as DDP issues it (comm op allreduce_step): stored with its mean, not
# fitted; a cluster whose link is {calib: NAME} then charges the mean instead of the sweep's time
# at the gradient (tinynet's 4,000,000 bytes), and the sweep's time when the entry's size is more
# than 1% away. Two workers, inline compute of 2 ms + 0.1 ms per sample, no jitter: an ssgd
# iteration at 64 samples is 5.2 ms plus one ring all-reduce of 2, which the link makes take
# exactly the time chosen. The sweep's time there is the log-log interpolation between 1 MiB
# (2.3 ms) and 16 MiB (32.3 ms).
step_profile() { # FILE BYTES MEAN
  sed "s/\"comm\": \[/\"comm\": [\n    {\"backend\": \"gloo\", \"op\": \"allreduce_step\", \"world_size\": 2, \"bytes\": $2, \"median_s\": 0.00045, \"p10_s\": 0.0004, \"p90_s\": 0.005, \"count\": 50, \"mean_s\": $3, \"batch\": 32, \"buckets\": 1},/" "$good" > "$1"
}
step_profile step.json 4000000 0.0075
step_profile step-far.json 4041000 0.0075
step_profile step-near.json 4039000 0.0075
cat > two.yaml <<'YAML'
name: two
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  g: {compute: {t0: 2ms, per_sample: 0.1ms, model: tinynet}}
nodes:
  - name: n0
    link: {calib: "Test GPU T1"}
    devices: [{type: g, count: 2}]
YAML
mean_iter() { /usr/bin/python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["mean_iteration_s"]))' "$TMP/out"; }
near() { /usr/bin/python3 -c 'import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b)<1e-12 else 1)' "$1" "$2"; }
sweep=$(/usr/bin/python3 -c 'import math; print(repr(0.0023 * (0.0323 / 0.0023) ** (math.log(4e6 / 1048576) / math.log(16))))')
simtwo() { # DB
  run "sim-$(basename "$1" .db)" 0 sim --cluster two.yaml --model tinynet --policy ssgd --global-batch 64 --iterations 10 --calib "$1" --db runs.db --json
}
"$HETSIM" calib import "$good" --db plain.db >/dev/null && simtwo plain.db && plain=$(mean_iter)
check step-sweep-baseline near "$plain" "$(/usr/bin/python3 -c "print(0.0052 + $sweep)")"
DB=$TMP/step.db
run step-import 0 calib import step.json --db "$DB"
check step-import-text has out "comm gloo allreduce_step (world 2): not fitted: the all-reduce as DDP issues it, used at its size (4000000 bytes) by its mean (0.0075 s of 50 steps, batch 32 per rank, 1 bucket)"
check step-stored test "$(q "SELECT count(*) FROM comm_sample WHERE op = 'allreduce_step' AND mean_s = 0.0075 AND median_s = 0.00045 AND bytes = 4000000")" = 1
check step-not-fitted test "$(q "SELECT count(*) FROM comm_model WHERE op = 'allreduce_step'")" = 0
run step-json 0 calib import step-near.json --db json.db --json
check step-json /usr/bin/python3 -c 'import json,sys; c=[g for g in json.load(open(sys.argv[1]))["imports"][0]["comm"] if g["op"] == "allreduce_step"]; assert len(c) == 1 and c[0]["sizes"] == 1 and c[0]["alpha_s"] is None and c[0]["mean_s"] == 0.0075 and c[0]["bytes"] == 4039000 and "DDP" in c[0]["why"] and all(g["bytes"] is None for g in json.load(open(sys.argv[1]))["imports"][0]["comm"] if g["op"] != "allreduce_step"), c' "$TMP/out"
simtwo "$DB" && check step-moves-by-the-difference near "$(mean_iter)" "$(/usr/bin/python3 -c "print($plain + 0.0075 - $sweep)")"
# The summary says which measurement each {calib} link took: the step mean here, the sweep's
# time at the gradient's size in plain.db, and the link the ring of 2 ranks ran over.
check step-calib-links /usr/bin/python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["calib_links"]; assert len(l) == 1 and l[0]["field"] == "nodes[0].link" and l[0]["calib"] == "Test GPU T1" and l[0]["measurement"] == "gloo allreduce_step, world size 2: the gradient'"'"'s all-reduce as DDP issues it, its mean over 50 steps, at the run'"'"'s message size" and abs(l[0]["latency_s"] * 2 + 4e6 / l[0]["bandwidth_bytes_per_s"] - 0.0075) < 1e-12, l' "$TMP/out"
run step-text 0 sim --cluster two.yaml --model tinynet --policy ssgd --global-batch 64 --iterations 10 --calib "$DB" --db runs.db
check step-text-link has out "  nodes[0].link    Test GPU T1: gloo allreduce_step, world size 2: the gradient's all-reduce as DDP issues it, its mean over 50 steps, at the run's message size (latency "
simtwo json.db && check step-within-1pct near "$(mean_iter)" "$(/usr/bin/python3 -c "print($plain + 0.0075 - $sweep)")"
"$HETSIM" calib import step-far.json --db far.db >/dev/null && simtwo far.db && check step-beyond-1pct-unchanged test "$(mean_iter)" = "$plain"
check step-beyond-1pct-sweep /usr/bin/python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["calib_links"]; assert len(l) == 1 and l[0]["measurement"] == "gloo allreduce, world size 2, beta at the run'"'"'s message size", l' "$TMP/out"
# Bad step entries: exit 2 with the path, nothing stored.
before=$(fingerprint)
sed 's/"mean_s": 0.0075, //' step.json > step-nomean.json
run step-no-mean 2 calib import step-nomean.json --db "$DB"
check step-no-mean-path has err "step-nomean.json: \$.comm[0].mean_s: missing (required)"
sed 's/"mean_s": 0.0075/"mean_s": -0.0075/' step.json > step-neg.json
run step-neg-mean 2 calib import step-neg.json --db "$DB"
check step-neg-mean-path has err "step-neg.json: \$.comm[0].mean_s: expected a positive number of seconds, got -0.0075"
sed 's/"bytes": 4096,/"bytes": 4096, "batch": 32,/' "$good" > plain-batch.json
run plain-batch 2 calib import plain-batch.json --db "$DB"
check plain-batch-path has err "plain-batch.json: \$.comm[0].batch: unknown key; expected one of backend, op, world_size, bytes, median_s, p10_s, p90_s, count, mean_s"
sed 's/"op": "p2p", "world_size": 2, "bytes": 65536, "median_s": 0.0001,/"op": "allreduce_step", "world_size": 2, "bytes": 65536, "median_s": 0.0001, "mean_s": 0.001,/' step.json > step-two.json
run step-two-sizes 2 calib import step-two.json --db "$DB"
check step-two-sizes-path has err "step-two.json: \$.comm[0]: gloo allreduce_step over 2 ranks at 4000000 bytes, and at 65536 bytes in \$.comm[4]"
check step-bad-stored-nothing test "$(fingerprint)" = "$before"

cli_finish
