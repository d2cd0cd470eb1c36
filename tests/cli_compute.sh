#!/usr/bin/env bash
# Compute that depends on the model (docs/cli.md "Compute for a model"): per-model forms with a
# default, the roofline charged with the model's training FLOPs (closed form), inline numbers
# that name their model (another model refused, nothing stored), the warning for inline numbers
# that do not, and links that take their numbers from measured communication.
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
H=$HETSIM
DB="$TMP/h.db"
runs() { rows "$DB" "SELECT count(*) FROM run"; }
mean_iter() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mean_iteration_s"])' "$TMP/out"; }
# close A B: |A/B - 1| < 1e-9
close() { python3 -c 'import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a/b-1)<1e-9 else 1)' "$1" "$2"; }
train_flops() { "$H" models --json | python3 -c 'import json,sys; print(next(m["train_flops_per_sample"] for m in json.load(sys.stdin) if m["name"]==sys.argv[1]))' "$1"; }
one() { # one FILE MODEL [ARGS...]: a one-worker ssgd run of batch 64, 10 iterations, --json
  local f=$1 m=$2
  shift 2
  "$H" sim --cluster "$f" --model "$m" --policy ssgd --global-batch 64 --iterations 10 --db "$DB" --json "$@" >"$TMP/out" 2>"$TMP/err"
}
cluster() { # cluster FILE COMPUTE: one node, one worker of type g with that compute mapping
  printf 'name: c\ndevice_types:\n  g: {compute: %s}\nnodes: [{name: n0, devices: [{type: g}]}]\n' "$2" >"$1"
}

# --- the roofline: t(b) = t0 + b * F / (flops * efficiency), exactly -----------------------
cluster "$TMP/roof.yaml" '{flops: 2TFLOPS, efficiency: 0.25, t0: 1ms}'
for m in mlp resnet18; do
  if one "$TMP/roof.yaml" "$m"; then
    want=$(python3 -c "print(1e-3 + 64 * $(train_flops $m) / (2e12 * 0.25))")
    check "roofline.$m" close "$(mean_iter)" "$want"
    check "roofline.$m.no_warning" test ! -s "$TMP/err"
  else
    bad "roofline.$m" "$(head -c 300 "$TMP/err")"
  fi
done

# --- per-model forms with a default: the model's own entry, else the default ---------------
cluster "$TMP/per.yaml" '{mlp: {t0: 2ms, per_sample: 0.1ms}, default: {flops: 2TFLOPS, efficiency: 0.25, t0: 1ms}}'
one "$TMP/per.yaml" mlp && check per_model.own close "$(mean_iter)" "$(python3 -c 'print(2e-3 + 64 * 1e-4)')"
one "$TMP/per.yaml" cnn && check per_model.default close "$(mean_iter)" \
  "$(python3 -c "print(1e-3 + 64 * $(train_flops cnn) / (2e12 * 0.25))")"
cluster "$TMP/nodef.yaml" '{mlp: {t0: 2ms, per_sample: 0.1ms}, resnet18: {t0: 5ms, per_sample: 3ms}}'
before=$(runs)
expect_exit per_model.no_entry 2 "$H" sim --cluster "$TMP/nodef.yaml" --model cnn --policy ssgd --global-batch 64 --iterations 1 --db "$DB"
check per_model.no_entry_message grep -q "nodef.yaml:3:16: device_types.g.compute: no numbers for model cnn (it has: mlp, resnet18" "$TMP/err"
check per_model.no_entry_nothing_stored test "$(runs)" = "$before"

# --- inline numbers measured for one model: another model refused, nothing stored ---------
cluster "$TMP/named.yaml" '{t0: 2ms, per_sample: 0.1ms, model: resnet18}'
one "$TMP/named.yaml" resnet18 && check named.same_model close "$(mean_iter)" "$(python3 -c 'print(2e-3 + 64 * 1e-4)')"
check named.same_model_no_warning test ! -s "$TMP/err"
before=$(runs)
expect_exit named.other_model 2 "$H" sim --cluster "$TMP/named.yaml" --model mlp --policy ssgd --global-batch 64 --iterations 1 --db "$DB"
check named.other_model_message grep -q "named.yaml:3:16: device_types.g.compute: its numbers were measured for model resnet18, not mlp" "$TMP/err"
check named.nothing_stored test "$(runs)" = "$before"

# --- inline numbers that do not say: one warning, and the run goes on ----------------------
cluster "$TMP/unnamed.yaml" '{t0: 2ms, per_sample: 0.1ms}'
one "$TMP/unnamed.yaml" mlp
check unnamed.runs test $? -eq 0
check unnamed.one_warning test "$(grep -c "warning: .*unnamed.yaml: the inline compute of g does not say which model" "$TMP/err")" = 1
check unnamed.json_clean python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/out"

# --- the bundled clusters: resnet18 keeps its numbers, other models get the roofline -------
C="$SRC/traces/lbb-4gpu.yaml"
"$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 256 --iterations 200 --db "$DB" --json >"$TMP/out" 2>"$TMP/err"
check bundled.resnet18_unchanged close "$(mean_iter)" 0.20901698100000027
check bundled.no_warning test ! -s "$TMP/err"
"$H" sim --cluster "$C" --model mlp --policy ssgd --global-batch 256 --iterations 20 --db "$DB" --json >"$TMP/out"
mlp=$(mean_iter)
"$H" sim --cluster "$C" --model vgg16 --policy ssgd --global-batch 256 --iterations 20 --db "$DB" --json >"$TMP/out"
vgg=$(mean_iter)
check bundled.models_differ python3 -c "import sys; sys.exit(0 if $vgg > 10 * $mlp else 1)"

# --- links from measured communication ------------------------------------------------------
# A device whose p2p model is alpha 50us, beta 1 GB/s; two workers on two nodes joined by the
# network {calib: net0}: one ssgd iteration = t(b) + 2(N-1)(alpha + M/(N beta)) (DESIGN.md).
CAL="$TMP/cal.db"
"$H" query --db "$CAL" runs >/dev/null 2>&1 || "$H" sim --cluster "$TMP/roof.yaml" --model mlp --policy ssgd --global-batch 64 --iterations 1 --db "$CAL" >/dev/null 2>&1
sqlite3 "$CAL" "INSERT INTO device(id, name, kind) VALUES (40, 'net0', 'cpu');
  INSERT INTO comm_model(device_id, backend, op, world_size, alpha_s, beta_bytes_per_s) VALUES (40, 'gloo', 'p2p', 2, 50e-6, 1e9);"
cat >"$TMP/net.yaml" <<'YAML'
name: net
network: {calib: net0}
device_types:
  g: {compute: {t0: 2ms, per_sample: 0.1ms, model: mlp}}
nodes:
  - {name: a, devices: [{type: g}]}
  - {name: b, devices: [{type: g}]}
YAML
if "$H" sim --cluster "$TMP/net.yaml" --model mlp --policy ssgd --global-batch 128 --iterations 10 --calib "$CAL" --db "$DB" --json >"$TMP/out" 2>"$TMP/err"; then
  M=$("$H" models --json | python3 -c 'import json,sys; print(next(m["grad_bytes"] for m in json.load(sys.stdin) if m["name"]=="mlp"))')
  check link_calib.p2p close "$(mean_iter)" "$(python3 -c "print(2e-3 + 64e-4 + 2 * (50e-6 + $M / (2 * 1e9)))")"
else
  bad link_calib.p2p "$(head -c 300 "$TMP/err")"
fi
# Only an all-reduce measured (world size 4: alpha' 600us, beta' 2 GB/s): the link that a ring of
# 4 would need, latency alpha'/6 and bandwidth beta' * 6/4.
sqlite3 "$CAL" "INSERT INTO device(id, name, kind) VALUES (41, 'ar0', 'cpu');
  INSERT INTO comm_model(device_id, backend, op, world_size, alpha_s, beta_bytes_per_s) VALUES (41, 'gloo', 'allreduce', 4, 600e-6, 2e9);"
sed 's/calib: net0/calib: ar0/' "$TMP/net.yaml" >"$TMP/ar.yaml"
if "$H" sim --cluster "$TMP/ar.yaml" --model mlp --policy ssgd --global-batch 128 --iterations 10 --calib "$CAL" --db "$DB" --json >"$TMP/out" 2>"$TMP/err"; then
  check link_calib.allreduce close "$(mean_iter)" "$(python3 -c "print(2e-3 + 64e-4 + 2 * (600e-6 / 6 + $M / (2 * 2e9 * 6 / 4)))")"
else
  bad link_calib.allreduce "$(head -c 300 "$TMP/err")"
fi
# jitter: {calib: NAME}: the cv of the lognormal through the measured steps' 10th and 90th
# percentiles (median sigma over the batch sizes): p90/p10 = e^(2 z90 s) with s = 0.1 here.
sqlite3 "$CAL" "INSERT INTO model(name, params, grad_bytes) SELECT 'mlp', 203530, 814120 WHERE NOT EXISTS (SELECT 1 FROM model WHERE name = 'mlp');
  INSERT INTO calib_sample(device_id, model, batch, phase, median_s, p10_s, p90_s, count) VALUES
  (40, 'mlp', 32, 'step', 0.01, 0.01, 0.01 * exp(2 * 1.2815515655446004 * 0.1), 20),
  (40, 'mlp', 64, 'step', 0.02, 0.02, 0.02 * exp(2 * 1.2815515655446004 * 0.1), 20);"
printf 'jitter: {calib: net0}\n' | cat "$TMP/net.yaml" - >"$TMP/jit.yaml"
if "$H" sim --cluster "$TMP/jit.yaml" --model mlp --policy ssgd --global-batch 128 --iterations 200 --calib "$CAL" --db "$DB" --json >"$TMP/out" 2>"$TMP/err"; then
  # Each iteration waits for the slower of two workers with lognormal noise of sigma 0.1: the
  # mean compute is above the noiseless 8.4 ms (by about 0.56 sigma), never below.
  check jitter_calib.slower python3 -c "import sys; m = $(mean_iter) - 2 * (50e-6 + $M / 2e9); sys.exit(0 if 1.02 < m / 8.4e-3 < 1.12 else 1)"
  # The summary says where the cv came from: sqrt(e^(0.1^2) - 1).
  check jitter_calib.summary python3 -c "import json, math, sys; j = json.load(open(sys.argv[1]))['calib_jitter']; sys.exit(0 if j['calib'] == 'net0' and abs(j['cv'] - math.sqrt(math.expm1(0.01))) < 1e-9 else 1)" "$TMP/out"
else
  bad jitter_calib.runs "$(head -c 300 "$TMP/err")"
fi
sed 's/jitter: {calib: net0}/jitter: {calib: nosuch}/' "$TMP/jit.yaml" >"$TMP/jit2.yaml"
expect_exit jitter_calib.unknown 2 "$H" sim --cluster "$TMP/jit2.yaml" --model mlp --policy ssgd --global-batch 128 --iterations 1 --calib "$CAL" --db "$DB"
check jitter_calib.unknown_message grep -q 'jit2.yaml:8:17: jitter.calib: no measured step spread' "$TMP/err"
sed 's/calib: net0/calib: nosuch/' "$TMP/net.yaml" >"$TMP/nosuch.yaml"
before=$(runs)
expect_exit link_calib.unknown 2 "$H" sim --cluster "$TMP/nosuch.yaml" --model mlp --policy ssgd --global-batch 128 --iterations 1 --calib "$CAL" --db "$DB"
check link_calib.unknown_message grep -q 'nosuch.yaml:2:18: network.calib: no measured communication .* for device "nosuch"' "$TMP/err"
check link_calib.nothing_stored test "$(runs)" = "$before"

# --- profiles named by the cluster file: imported when the run starts ----------------------
# tinynet is not in the zoo: the profile brings the model; at a measured batch the step takes
# the measured median exactly (2.8 ms at 8, 3.6 ms at 16).
mkdir -p "$TMP/p/profiles"
cp "$SRC/tests/data/profile-tinynet.json" "$TMP/p/profiles/tiny.json"
cluster "$TMP/p/prof.yaml" '{tinynet: {profile: profiles/tiny.json}, default: {flops: 1TFLOPS, efficiency: 0.5}}'
"$H" sim --cluster "$TMP/p/prof.yaml" --model tinynet --policy ssgd --global-batch 16 --iterations 10 --db "$TMP/p.db" --json >"$TMP/out" 2>"$TMP/err"
check profile.measured close "$(mean_iter)" 0.0036
check profile.no_calib_db_needed test ! -e "$TMP/p/hetsim.db"
check profile.nothing_imported_into_results test "$(rows "$TMP/p.db" "SELECT count(*) FROM device")" = 0
"$H" sim --cluster "$TMP/p/prof.yaml" --model mlp --policy ssgd --global-batch 64 --iterations 10 --db "$TMP/p.db" --json >"$TMP/out" 2>"$TMP/err"
check profile.other_model_default close "$(mean_iter)" "$(python3 -c "print(64 * $(train_flops mlp) / (1e12 * 0.5))")"
cluster "$TMP/p/one.yaml" '{profile: profiles/tiny.json}'
before=$(rows "$TMP/p.db" "SELECT count(*) FROM run")
expect_exit profile.wrong_model 2 "$H" sim --cluster "$TMP/p/one.yaml" --model mlp --policy ssgd --global-batch 64 --iterations 1 --db "$TMP/p.db"
check profile.wrong_model_message grep -q "one.yaml:3:16: device_types.g.compute.profile: the profile .*tiny.json measures model tinynet, not mlp" "$TMP/err"
cluster "$TMP/p/missing.yaml" '{profile: profiles/nope.json}'
expect_exit profile.missing 2 "$H" sim --cluster "$TMP/p/missing.yaml" --model tinynet --policy ssgd --global-batch 64 --iterations 1 --db "$TMP/p.db"
check profile.missing_message grep -q 'no profile "profiles/nope.json"' "$TMP/err"
printf '{"format": "hetsim-profile", "version": 1}\n' >"$TMP/p/profiles/bad.json"
cluster "$TMP/p/bad.yaml" '{profile: profiles/bad.json}'
expect_exit profile.bad 2 "$H" sim --cluster "$TMP/p/bad.yaml" --model tinynet --policy ssgd --global-batch 64 --iterations 1 --db "$TMP/p.db"
check profile.bad_names_field grep -q 'bad.json: \$.created_at' "$TMP/err"
check profile.refusals_store_nothing test "$(rows "$TMP/p.db" "SELECT count(*) FROM run")" = "$before"
# A bundled profile by name: Gavel's V100 ResNet-18 at batch 64 (traces/profiles/README.md).
cluster "$TMP/bundled.yaml" '{resnet18: {profile: v100/resnet18}}'
"$H" sim --cluster "$TMP/bundled.yaml" --model resnet18 --policy ssgd --global-batch 64 --iterations 10 --db "$TMP/p.db" --json >"$TMP/out" 2>"$TMP/err"
check profile.bundled_gavel close "$(mean_iter)" 0.04150543207910772
HETSIM_PROFILES="$TMP/none" "$H" sim --cluster "$TMP/bundled.yaml" --model resnet18 --policy ssgd --global-batch 64 --iterations 1 --db "$TMP/p.db" >"$TMP/out" 2>"$TMP/err"
check profile.bundled_dir_override grep -q "nor in the bundled profiles $TMP/none" "$TMP/err"

# A model outside the zoo trains under the analytic model once its own curves are fitted: the
# profile brings its timings, `fit-convergence --curves` its parameters and its epoch.
awk 'BEGIN { print "samples,loss,accuracy,batch,workers,policy"
  for (g = 0; g < 2; g++) { b = g ? 64 : 16
    for (i = 0; i <= 12; i++) { S = i * 2000; k = S * (300 + 128) / (300 + 2 * b) / 20000
      l = 1 / (4 * k + 0.5) + 0.4; printf "%d,%.15g,%.15g,%d,2,ssgd\n", S, l, 0.1 + 0.8 * exp(-1.5 * (l - 0.4)), b } } }' >"$TMP/p/curves.csv"
before=$(rows "$TMP/p.db" "SELECT count(*) FROM run")
expect_exit imported_conv.no_fit 2 "$H" sim --cluster "$TMP/p/prof.yaml" --model tinynet --policy ssgd --global-batch 16 --iterations 10 --convergence analytic --db "$TMP/p.db"
check imported_conv.no_fit_says grep -q "no convergence fit of its own" "$TMP/err"
expect_exit imported_conv.proxy 2 "$H" sim --cluster "$TMP/p/prof.yaml" --model tinynet --policy ssgd --global-batch 16 --iterations 10 --convergence proxy --db "$TMP/p.db"
expect_exit imported_conv.epochs 2 "$H" sim --cluster "$TMP/p/prof.yaml" --model tinynet --policy ssgd --global-batch 16 --epochs 1 --db "$TMP/p.db"
check imported_conv.refusals_store_nothing test "$(rows "$TMP/p.db" "SELECT count(*) FROM run")" = "$before"
run imported_conv.fit 0 fit-convergence --curves "$TMP/p/curves.csv" --model tinynet --classes 10 --dataset-size 20000 --db "$TMP/p.db"
if run imported_conv.sim 0 sim --cluster "$TMP/p/prof.yaml" --model tinynet --policy ssgd --global-batch 32 --epochs 1 --convergence analytic --target-loss 0.6 --db "$TMP/p.db" --json; then
  check imported_conv.json /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert 0 < d["iterations"] < 625, d["iterations"]      # before one epoch of the curves: 20000 / 32
assert d["stop_reason"] == "target" and d["final_loss"] <= 0.6 and d["time_to_target_s"] is not None, d
assert d["convergence_source"].startswith("convergence_fit "), d["convergence_source"]
' "$TMP/out"
fi

# Fewer than 3 batch sizes only where memory ran out before a third (Sailor's OPT-350M on a
# 24 GB card fits batch 1 alone): the line through them, flat through one, not judged.
run few_batches.import 0 calib import "$SRC/traces/profiles/titan-rtx/opt-350m.json" --db "$TMP/few.db" &&
  check few_batches.flat_fit test "$(rows "$TMP/few.db" "SELECT form || ':' || max_batch || ':' || (heldout_rel_error IS NULL) FROM perf_model WHERE phase = 'step' AND chosen = 1")" = "linear:1:1"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["oom_batch"]=None; json.dump(d,open(sys.argv[2],"w"))' \
  "$SRC/traces/profiles/titan-rtx/opt-350m.json" "$TMP/few-nolimit.json"
run few_batches.needs_limit 2 calib import "$TMP/few-nolimit.json" --db "$TMP/few2.db" &&
  check few_batches.needs_limit_message has err '$.compute: step times at 1 batch size'

# Every bundled card, with where its numbers come from.
run devices.bundled 0 devices --bundled --json &&
  check devices.bundled_all /usr/bin/python3 -c '
import json, sys, glob
rows = json.load(open(sys.argv[1]))
want = len(glob.glob(sys.argv[2] + "/traces/profiles/*/*.json"))
assert len(rows) == want and want > 0, (len(rows), want)
assert all(r["source"] and " from " in r["source"] for r in rows), rows[0]
' "$TMP/out" "$SRC"
run devices.bundled_and_db 2 devices --bundled --db "$DB"
# ... and every bundled model outside the zoo, with its parameters and gradient bytes.
run models.bundled 0 models --bundled --json &&
  check models.bundled_listed /usr/bin/python3 -c '
import json, sys
rows = {r["name"]: r for r in json.load(open(sys.argv[1]))}
for m in ("resnet50", "transformer", "lstm-lm", "opt-350m", "mlp"):
    assert m in rows and rows[m]["params"] > 0 and rows[m]["grad_bytes"] > 0, m
assert rows["opt-350m"]["params"] == 407431168, rows["opt-350m"]
' "$TMP/out"

cli_finish
