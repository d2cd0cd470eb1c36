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

cli_finish
