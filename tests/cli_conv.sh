#!/usr/bin/env bash
# CLI tests for convergence in `hetsim sim` (--convergence, --convergence-params, --target-loss,
# --target-accuracy) and `hetsim fit-convergence`. Usage: cli_conv.sh HETSIM SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP # the short names this script uses
C="$SRC/traces/lbb-4gpu.yaml"
S=(sim --cluster "$C" --model mlp --policy ssgd --global-batch 512 --db "$T/h.db")

# --- analytic: summary keys, eval rows, step losses ---------------------------------------
expect_exit analytic_json 0 "$H" "${S[@]}" --iterations 50 --convergence analytic:eval_every=10 --json
for k in final_loss final_accuracy time_to_target_s; do check "analytic_json_has_$k" grep -q "\"$k\":" "$T/out"; done
check analytic_no_target_null grep -q '"time_to_target_s": null' "$T/out"
check analytic_eval_rows test "$(val "$T/h.db" "SELECT count(*) FROM eval WHERE run_id=1")" = 5
check analytic_step_losses test "$(val "$T/h.db" "SELECT count(*) FROM step WHERE run_id=1 AND loss IS NULL")" = 0
check analytic_loss_falls test "$(val "$T/h.db" "SELECT (SELECT loss FROM eval WHERE run_id=1 AND step=50) < (SELECT loss FROM eval WHERE run_id=1 AND step=10)")" = 1
check options_record_convergence test "$(val "$T/h.db" "SELECT json_extract(options,'\$.convergence') FROM run WHERE id=1")" = analytic

# --- targets: alone as the stop condition, time_to_target_s set ----------------------------
expect_exit target_loss 0 "$H" "${S[@]}" --convergence analytic --target-loss 0.6 --json
check target_loss_time python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["time_to_target_s"] == d["sim_time_s"] > 0 and d["final_loss"] <= 0.6, d' "$T/out"
expect_exit target_accuracy 0 "$H" "${S[@]}" --convergence analytic:acc_max=0.9,acc_alpha=2 --target-accuracy 80% --json
check target_accuracy_time python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["time_to_target_s"] > 0 and d["final_accuracy"] >= 0.8, d' "$T/out"
# The rational map: accuracy = acc_max - acc_slope x / (1 + acc_bend x), x = loss - beta2.
expect_exit rational_map 0 "$H" "${S[@]}" --iterations 40 --convergence analytic:acc_max=0.9,acc_slope=0.5,acc_bend=0.1,eval_every=10 --json
check rational_map_value python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); x=d["final_loss"]-0.396; assert abs(d["final_accuracy"] - (0.9 - 0.5*x/(1 + 0.1*x))) < 1e-12, d' "$T/out"
# With acc_noise the evaluations stand for noisy ones: the run ends at the median first passage,
# the first evaluation by which prod(1 - Phi((a_j - A) / sigma)) <= 1/2 over the evaluations so
# far (a_j their stored mean accuracies), which is earlier than the mean's own crossing.
expect_exit target_noise 0 "$H" "${S[@]}" --convergence analytic:acc_max=0.9,acc_alpha=2,acc_noise=0.01,eval_every=5 --target-accuracy 0.85 --json
cp "$T/out" "$T/noise.json"
expect_exit target_noise_free 0 "$H" "${S[@]}" --convergence analytic:acc_max=0.9,acc_alpha=2,eval_every=5 --target-accuracy 0.85 --json
check target_noise_first_passage python3 - "$T/noise.json" "$T/out" "$T/h.db" <<'PY'
import json, math, sqlite3, sys
noisy, free = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
rows = sqlite3.connect(sys.argv[3]).execute("SELECT step, time_s, accuracy FROM eval WHERE run_id = ? ORDER BY step",
                                            (noisy["run_id"],)).fetchall()
miss, stop = 1.0, None
for step, t, a in rows:
    miss *= 1 - 0.5 * math.erfc((0.85 - a) / (0.01 * math.sqrt(2)))
    if miss <= 0.5:
        stop = (step, t)
        break
assert stop and stop[0] == rows[-1][0] and stop[1] == noisy["time_to_target_s"], (stop, rows[-3:], noisy)
assert noisy["iterations"] < free["iterations"] and free["final_accuracy"] >= 0.85 > noisy["final_accuracy"], (noisy, free)
PY
expect_exit target_text 0 "$H" "${S[@]}" --iterations 5 --convergence analytic --target-loss 0.4
check target_text_not_reached grep -q "time to target   not reached" "$T/out"

# --- parameters from a file -----------------------------------------------------------------
# phi huge: E = 1, so k = 2000 * 512 / 60000 and l = 1/(k + 1) + 0.5 = 0.55534...
printf 'beta2 = 0.5  # a floor\nbeta0=1\nbeta1=1\nphi=1e12\n' >"$T/p.conf"
expect_exit params_file 0 "$H" "${S[@]}" --iterations 2000 --convergence analytic --convergence-params "$T/p.conf" --json
check params_file_used python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); k=2000*512/60000; assert abs(d["final_loss"] - (1/(k+1)+0.5)) < 1e-9, d' "$T/out"
expect_exit params_file_override 0 "$H" "${S[@]}" --iterations 2000 --convergence analytic:beta2=0.25 --convergence-params "$T/p.conf" --json
check params_file_override_used python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); k=2000*512/60000; assert abs(d["final_loss"] - (1/(k+1)+0.25)) < 1e-9, d' "$T/out"

# --- bad values exit 2 and store nothing ----------------------------------------------------
n=$(val "$T/h.db" "SELECT count(*) FROM run")
expect_exit bad_conv_name 2 "$H" "${S[@]}" --iterations 5 --convergence fast
check bad_conv_name_lists grep -q "valid: none, analytic, proxy" "$T/err"
expect_exit bad_conv_key 2 "$H" "${S[@]}" --iterations 5 --convergence analytic:phi=-1
expect_exit bad_conv_unknown_key 2 "$H" "${S[@]}" --iterations 5 --convergence analytic:nope=1
expect_exit bad_target_loss 2 "$H" "${S[@]}" --iterations 5 --convergence analytic --target-loss abc
expect_exit bad_target_loss_neg 2 "$H" "${S[@]}" --iterations 5 --convergence analytic --target-loss -1
expect_exit bad_target_acc 2 "$H" "${S[@]}" --iterations 5 --convergence analytic --target-accuracy 1.5
expect_exit target_needs_conv 2 "$H" "${S[@]}" --target-loss 0.5
check target_needs_conv_says grep -q "need a convergence model" "$T/err"
expect_exit params_needs_conv 2 "$H" "${S[@]}" --iterations 5 --convergence-params "$T/p.conf"
expect_exit params_missing 2 "$H" "${S[@]}" --iterations 5 --convergence analytic --convergence-params "$T/none.conf"
printf 'beta0\n' >"$T/bad.conf"
expect_exit params_bad_line 2 "$H" "${S[@]}" --iterations 5 --convergence analytic --convergence-params "$T/bad.conf"
check params_bad_line_says grep -q "bad.conf:1: expected key=value" "$T/err"
expect_exit proxy_resnet 2 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 64 --iterations 2 --convergence proxy --db "$T/h.db"
check proxy_resnet_says grep -q "mlp or cnn" "$T/err"
check bad_stored_nothing test "$(val "$T/h.db" "SELECT count(*) FROM run")" = "$n"

# --- proxy, then fit-convergence on its evaluations ------------------------------------------
fashion_mnist_or_synthetic
P=proxy:eval_every=5,train_samples=2000,eval_samples=500
expect_exit proxy_json 0 "$H" "${S[@]}" --iterations 40 --convergence "$P" --json --store summary
check proxy_accuracy python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert 0.5 < d["final_accuracy"] <= 1 and d["final_loss"] < 1.5, d' "$T/out"
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$T/out")
check proxy_eval_rows test "$(val "$T/h.db" "SELECT count(*) FROM eval WHERE run_id=$id AND accuracy IS NOT NULL")" = 8
expect_exit fit 0 "$H" fit-convergence "$id" --db "$T/h.db" --out "$T/fit.conf" --json
check fit_json python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["evaluations"] == 8 and "beta0" in d["fitted"], d' "$T/out"
# How well the analytic form fits is a property of Fashion-MNIST's loss curve: the synthetic
# stand-in's falls much faster (to about 0.13 in 40 iterations) and is fitted more loosely.
[ "$FMNIST" = real ] &&
  check fit_json_close python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["loss_rms"] < 0.1, d' "$T/out"
expect_exit fit_roundtrip 0 "$H" "${S[@]}" --iterations 40 --convergence analytic:eval_every=5 --convergence-params "$T/fit.conf" --json
[ "$FMNIST" = real ] && check fit_roundtrip_close python3 -c '
import json,sys,sqlite3
d=json.load(open(sys.argv[1])); db=sqlite3.connect(sys.argv[2])
(l,)=db.execute("SELECT loss FROM eval WHERE run_id=? AND step=40",(int(sys.argv[3]),)).fetchone()
assert abs(d["final_loss"]-l) < 0.15, (d["final_loss"], l)' "$T/out" "$T/h.db" "$id"
# Runs of localsgd: an iteration is one average of tau local steps. An analytic ssgd run and a
# localsgd run (tau 8) made with lambda_tau 0.03 give it back within 0.1% (the same global batch,
# so phi is not fitted).
L="analytic:beta0=5,beta1=0.5,beta2=0.3,lambda_tau=0.03"
expect_exit local_ssgd 0 "$H" sim --cluster "$C" --model mlp --policy ssgd --global-batch 128 --iterations 200 --convergence "$L,eval_every=10" --db "$T/local.db" --json
expect_exit local_tau8 0 "$H" sim --cluster "$C" --model mlp --policy localsgd:tau=8 --global-batch 128 --iterations 40 --convergence "$L,eval_every=2" --db "$T/local.db" --json
expect_exit fit_local_runs 0 "$H" fit-convergence 1 2 --db "$T/local.db" --json
check fit_local_runs_lambda_tau python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["params"]
assert "lambda_tau" in d["fitted"] and "phi" not in d["fitted"], d
for k, v in (("lambda_tau", 0.03), ("beta0", 5), ("beta1", 0.5), ("beta2", 0.3)): assert abs(p[k] - v) < 1e-3 * v, (k, p)' "$T/out"
expect_exit fit_no_runs 2 "$H" fit-convergence --db "$T/h.db"
expect_exit fit_unknown_run 2 "$H" fit-convergence 999 --db "$T/h.db"
expect_exit fit_not_analytic 2 "$H" fit-convergence 1 --db "$T/h.db" --convergence proxy
expect_exit plain_run 0 "$H" "${S[@]}" --iterations 3 --json
id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$T/out")
expect_exit fit_no_evals 2 "$H" fit-convergence "$id" --db "$T/h.db"
check fit_no_evals_says grep -q "no evaluations" "$T/err"

cli_finish
