#!/usr/bin/env bash
# `hetsim fit-convergence --curves FILE.csv`: curves generated from known analytic parameters
# are fitted back; the fit is stored in convergence_fit (once per file and options); `hetsim sim
# --convergence analytic` takes the newest fit of its model (from --calib, else --db) and says
# so; bad CSVs exit 2 naming FILE:LINE and store nothing. Usage: cli_fit_curves.sh HETSIM SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP
DB="$T/f.db"
cd "$T"
C="$SRC/traces/lbb-4gpu.yaml"

# Curves of the analytic model itself (docs/convergence.md) with phi 300, b0 128, beta0 5,
# beta1 0.5, beta2 0.3, lambda_s 0.2, acc_max 0.9, acc_alpha 1.5, 10 classes, D = 60,000 samples
# per epoch: two synchronous groups (32 x 2 workers and 128 x 4: u = 64 and 512) and one
# asynchronous (asp, 32 per push, 4 workers: staleness 3). COLS picks the columns written.
gen() { # COLS (samples,epoch,... as in the header) [D]
  awk -v cols="$1" -v D="${2:-60000}" 'BEGIN {
    phi = 300; b0 = 128; beta0 = 5; beta1 = 0.5; beta2 = 0.3; ls = 0.2; am = 0.9; al = 1.5; ch = 0.1
    n = split(cols, c, ",")
    print cols
    split("32 128 32", B, " "); split("2 4 4", W, " "); split("ssgd ddp asp", P, " ")
    for (g = 1; g <= 3; g++) {
      u = P[g] == "asp" ? B[g] : B[g] * W[g]; s = P[g] == "asp" ? W[g] - 1 : 0
      for (i = 0; i <= 15; i++) {
        S = i * 4000
        k = S * (phi + b0) / (phi + u) / (1 + ls * s) / D
        l = 1 / (beta0 * k + beta1) + beta2
        a = ch + (am - ch) * exp(-al * (l - beta2))
        v["samples"] = S; v["epoch"] = sprintf("%.15g", S / D); v["loss"] = sprintf("%.15g", l)
        v["accuracy"] = sprintf("%.15g", a); v["batch"] = B[g]; v["workers"] = W[g]; v["policy"] = P[g]
        v["lr"] = 0.1
        line = ""
        for (j = 1; j <= n; j++) line = line (j > 1 ? "," : "") v[c[j]]
        print line
      }
    }
  }'
}
gen samples,epoch,loss,accuracy,batch,workers,policy >c.csv
# Every parameter within 0.1% of the one the curves were made from (they are exact, so the
# fit is too, up to the solver's tolerance).
params_ok() { # JSON_FILE
  python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["params"]
want = dict(phi=300, b0=128, beta0=5, beta1=0.5, beta2=0.3, lambda_s=0.2, acc_max=0.9, acc_alpha=1.5)
bad = {k: (p[k], v) for k, v in want.items() if abs(p[k] - v) > 1e-3 * v}
if bad: print("off:", bad, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
expect_exit fit 0 "$H" fit-convergence --curves c.csv --model mynet --classes 10 --db "$DB" --out fit.conf --json
cp out fit.json
check fit_params params_ok fit.json
check fit_fitted python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert set(d["fitted"]) == {"beta0","beta1","beta2","phi","lambda_s","acc_max","acc_alpha","acc_noise"} and d["params"]["acc_noise"] < 1e-6 and d["points"] == 48 and d["groups"] == 3 and d["loss_rms"] < 1e-6 and d["already_stored"] is False, d' fit.json
# Curves whose accuracy follows the rational map (acc_max 0.88, acc_slope 0.45, acc_bend 0.075,
# at least chance 0.1; loss as above, one group): it is the map fitted, its parameters recovered
# within 0.1%.
awk 'BEGIN {
  print "samples,loss,accuracy,batch"
  for (i = 0; i < 30; i++) {
    S = i * 3000; k = S / 60000; l = 1 / (5 * k + 0.5) + 0.3; x = l - 0.3
    a = 0.88 - 0.45 * x / (1 + 0.075 * x)
    printf "%d,%.15g,%.15g,128\n", S, l, (a > 0.1 ? a : 0.1)
  }
}' >rational.csv
expect_exit fit_rational 0 "$H" fit-convergence --curves rational.csv --model ratnet --classes 10 --dataset-size 60000 --db "$T/rat.db" --json
check fit_rational_map python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["params"]
assert {"acc_max", "acc_slope", "acc_bend"} <= set(d["fitted"]) and "acc_alpha" not in d["fitted"] and p["acc_alpha"] == 0, d
for k, v in (("acc_max", 0.88), ("acc_slope", 0.45), ("acc_bend", 0.075)): assert abs(p[k] - v) < 1e-3 * v, (k, p)
assert d["accuracy_rms"] < 1e-6, d' "$T/out"
# Two seeds' noise-free curves, the second's accuracy 0.02 above the first's at every point: with
# the seed column each seed is a group of its own and the neighbours of a point are its seed's,
# so only the curve's bends are seen (0.0014; 2 groups); without it (the column renamed, so
# ignored) one group mixes the seeds and their 0.02 apart reads as noise.
awk 'BEGIN {
  print "samples,loss,accuracy,batch,seed"
  for (i = 0; i < 20; i++) for (s = 0; s < 2; s++) {
    S = i * 3000; k = S / 60000; l = 1 / (5 * k + 0.5) + 0.3
    printf "%d,%.15g,%.15g,128,%s\n", S, l, 0.1 + 0.8 * exp(-1.5 * (l - 0.3)) + 0.02 * s, s ? "b" : "a"
  }
}' >seeds.csv
sed '1s/seed$/run_label/' seeds.csv >noseed.csv
expect_exit fit_seeds 0 "$H" fit-convergence --curves seeds.csv --model seednet --classes 10 --dataset-size 60000 --db "$T/seeds.db" --json
check fit_seeds_groups python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["groups"] == 2 and d["params"]["acc_noise"] < 0.003, d' "$T/out"
expect_exit fit_noseed 0 "$H" fit-convergence --curves noseed.csv --model seednet --classes 10 --dataset-size 60000 --db "$T/seeds.db" --json
check fit_noseed_mixed python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["groups"] == 1 and d["params"]["acc_noise"] > 0.005, d' "$T/out"
# The accuracy noise, from curves with known noise: one synchronous curve of 80 evaluations whose
# accuracies carry independent normal noise of deviation 0.01 (a fixed seed), fitted back within
# a third of it.
awk 'BEGIN {
  srand(7); pi = atan2(0, -1)
  print "samples,loss,accuracy,batch,workers"
  for (i = 0; i < 80; i++) {
    S = i * 2000; k = S / 60000; l = 1 / (5 * k + 0.5) + 0.3
    z = sqrt(-2 * log(1 - rand())) * cos(2 * pi * rand())
    printf "%d,%.9g,%.9g,64,2\n", S, l, 0.1 + 0.8 * exp(-1.5 * (l - 0.3)) + 0.01 * z
  }
}' >noisy.csv
expect_exit fit_noise 0 "$H" fit-convergence --curves noisy.csv --model noisynet --classes 10 --dataset-size 60000 --db "$T/noise.db" --json
check fit_noise_value python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "acc_noise" in d["fitted"] and 0.0067 < d["params"]["acc_noise"] < 0.0133, d' "$T/out"
# Local SGD: DDP's curve and two local-SGD curves (32 x 4 workers, averaging every 8 and 32
# steps), all at 128 samples per averaged step (so E = 1 with b0 128 and phi not fitted), their
# progress discounted by Ptau(tau) = 1/(1 + 0.03 (tau - 1)): lambda_tau is fitted back within
# 0.1%, and a simulation of localsgd with the fit gives the curve's loss.
awk 'BEGIN {
  print "samples,loss,accuracy,batch,workers,policy,period"
  split("1 8 32", T, " ")
  for (g = 1; g <= 3; g++) for (i = 0; i <= 15; i++) {
    S = i * 4096; k = S / (1 + 0.03 * (T[g] - 1)) / 60000; l = 1 / (5 * k + 0.5) + 0.3
    printf "%d,%.15g,%.15g,32,4,%s,%s\n", S, l, 0.1 + 0.8 * exp(-1.5 * (l - 0.3)), T[g] == 1 ? "ddp" : "localsgd", T[g] == 1 ? "" : T[g]
  }
}' >local.csv
expect_exit fit_local 0 "$H" fit-convergence --curves local.csv --model mlp --db "$T/local.db" --json
check fit_local_lambda_tau python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["params"]
assert "lambda_tau" in d["fitted"] and "phi" not in d["fitted"] and d["groups"] == 3 and d["stalls"] == [], d
for k, v in (("lambda_tau", 0.03), ("beta0", 5), ("beta1", 0.5), ("beta2", 0.3)): assert abs(p[k] - v) < 1e-3 * v, (k, p)' "$T/out"
check fit_local_no_warning test ! -s err
# Local SGD's curves alone, at two periods (no DDP curve): one fit of the curve and lambda_tau
# together, which the two periods tell apart.
grep -v ',ddp,' local.csv >local2.csv
expect_exit fit_local_only 0 "$H" fit-convergence --curves local2.csv --model mlp --db "$T/local2.db" --json
check fit_local_only_lambda_tau python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["params"]
assert "lambda_tau" in d["fitted"] and d["groups"] == 2, d
for k, v in (("lambda_tau", 0.03), ("beta0", 5), ("beta1", 0.5), ("beta2", 0.3)): assert abs(p[k] - v) < 1e-3 * v, (k, p)' "$T/out"
# A local-SGD curve that is not a slowed synchronous one (the same slowdown, plus a floor 0.05
# higher): the curve's parameters come from DDP's curve alone, exactly, and lambda_tau from the
# local curve (above the 0.03 of its slowdown, to make up for the floor).
awk 'BEGIN {
  print "samples,loss,batch,workers,policy,period"
  for (g = 1; g <= 2; g++) for (i = 0; i <= 15; i++) {
    T = g == 1 ? 1 : 32; S = i * 4096; k = S / (1 + 0.03 * (T - 1)) / 60000
    printf "%d,%.15g,32,4,%s,%s\n", S, 1 / (5 * k + 0.5) + 0.3 + (T > 1 ? 0.05 : 0), T == 1 ? "ddp" : "localsgd", T == 1 ? "" : T
  }
}' >floor.csv
expect_exit fit_floor 0 "$H" fit-convergence --curves floor.csv --model mlp --db "$T/floor.db" --json
check fit_floor_sync_curve python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["params"]
assert "lambda_tau" in d["fitted"] and p["lambda_tau"] > 0.03 and d["stalls"] == [], d
for k, v in (("beta0", 5), ("beta1", 0.5), ("beta2", 0.3)): assert abs(p[k] - v) < 1e-3 * v, (k, p)' "$T/out"
# A local-SGD curve that stalls: the slowed curve until loss 0.8, then 0.8. lambda_tau cannot
# follow it; the fit says so (a warning, and `stalls` in the JSON) at that level.
awk 'BEGIN {
  print "samples,loss,batch,workers,policy,period"
  for (g = 1; g <= 2; g++) for (i = 0; i <= 15; i++) {
    T = g == 1 ? 1 : 32; S = i * 4096; k = S / (1 + 0.03 * (T - 1)) / 60000; l = 1 / (5 * k + 0.5) + 0.3
    if (T > 1 && l < 0.8) l = 0.8
    printf "%d,%.15g,32,4,%s,%s\n", S, l, T == 1 ? "ddp" : "localsgd", T == 1 ? "" : T
  }
}' >stall.csv
expect_exit fit_stall 0 "$H" fit-convergence --curves stall.csv --model mlp --db "$T/stall.db" --json
check fit_stall_json python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stalls"]
assert len(s) == 1 and s[0]["period"] == 32 and s[0]["level"] == 0.8 and s[0]["above"] > 0.05, s' "$T/out"
check fit_stall_warns grep -q "warning: local SGD at period 32 levels off above the fit .* a target below about 0.8 may be predicted reached that it never reaches" err
# Too few local-SGD points for lambda_tau: exit 2, saying so.
head -18 floor.csv >floor1.csv
expect_exit fit_floor_few 2 "$H" fit-convergence --curves floor1.csv --model mlp --db "$T/floor.db"
check fit_floor_few_says grep -q "1 points of local SGD are too few to fit lambda_tau" err
# 10 averages of 16 local steps of 4 x 32 samples on lbb-4gpu's 4 workers.
expect_exit sim_local 0 "$H" sim --cluster "$C" --model mlp --policy localsgd:tau=16 --global-batch 128 --iterations 10 --convergence analytic --db "$T/local.db" --json
check sim_local_loss python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); k=10*16*128/(1+0.03*15)/60000; assert abs(d["final_loss"] - (1/(5*k+0.5)+0.3)) < 1e-6, (d["final_loss"], 1/(5*k+0.5)+0.3)' "$T/out"
check fit_out_file grep -q "^beta0=5$" fit.conf
# The stored row: the model, the source (the file's name and FNV-1a 64 of its bytes), the points,
# the RMSE, and the parameters with the data set's size.
row_ok() {
  python3 - "$DB" c.csv fit.json <<'PY'
import json, sqlite3, sys
h = 0xcbf29ce484222325
for b in open(sys.argv[2], "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
rows = sqlite3.connect(sys.argv[1]).execute("SELECT id, model, source, points, rmse, params FROM convergence_fit").fetchall()
fit = json.load(open(sys.argv[3]))
ok = len(rows) == 1
if not ok: print(rows, file=sys.stderr)
if ok:
    i, m, src, pts, rmse, params = rows[0]
    p = json.loads(params)
    ok = (i == fit["convergence_fit_id"] and m == "mynet" and src == "c.csv fnv1a64:%016x" % h and pts == 48
          and abs(rmse - fit["loss_rms"]) <= 1e-15 and p["dataset_size"] == 60000 and p["classes"] == 10
          and all(abs(p[k] - v) <= 1e-12 * abs(v) for k, v in fit["params"].items()))
    if not ok: print(rows, fit, "%016x" % h, file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}
check fit_row row_ok
# The same file and options again: nothing new is stored, and it says so.
expect_exit fit_again 0 "$H" fit-convergence --curves c.csv --model mynet --classes 10 --db "$DB"
check fit_again_says grep -q "^# already stored as convergence_fit 1 in" out
check fit_again_one_row test "$(val "$DB" "SELECT count(*) FROM convergence_fit")" = 1

# Epochs instead of samples, with --dataset-size: the same fit. Columns in another order, and
# one the fit does not read (ignored, with a note).
gen policy,workers,batch,lr,epoch,loss,accuracy >e.csv
expect_exit fit_epochs 0 "$H" fit-convergence --curves e.csv --model mynet --classes 10 --dataset-size 60000 --db "$DB" --json
check fit_epochs_params params_ok out
check fit_epochs_ignored grep -q "ignoring columns lr" err
check fit_epochs_new_row test "$(val "$DB" "SELECT count(*) FROM convergence_fit")" = 2
# Epochs of a model outside the zoo need the data set's size.
expect_exit fit_epochs_no_size 2 "$H" fit-convergence --curves e.csv --model mynet --db "$DB"
check fit_epochs_no_size_says grep -q "give --dataset-size" err

# --- the simulator uses the newest fit of its model ---------------------------------------------
# mlp's curves: one group at 64 samples per update, beta0 4, beta1 0.4, beta2 0.35, phi as
# --convergence sets it (one batch size cannot tell phi).
awk 'BEGIN { print "samples,loss,batch"; for (i = 0; i <= 12; i++) { S = i * 5000; k = S / 60000
  printf "%d,%.15g,64\n", S, 1 / (4 * k + 0.4) + 0.35 } }' >mlp.csv
expect_exit fit_mlp 0 "$H" fit-convergence --curves mlp.csv --model mlp --convergence analytic:phi=1e12 --db "$DB" --json
mlp_fit=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["convergence_fit_id"])' out)
S=(sim --cluster "$C" --model mlp --policy ssgd --global-batch 512 --iterations 200 --convergence analytic)
expect_exit sim_fit 0 "$H" "${S[@]}" --db "$DB" --json
# The final loss is the fitted curve's: phi huge so E = 1, k = 200 x 512 / 60000.
check sim_fit_loss python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); k=200*512/60000; assert abs(d["final_loss"] - (1/(4*k+0.4)+0.35)) < 1e-6, d' out
check sim_fit_source grep -q "\"convergence_source\": \"convergence_fit $mlp_fit: mlp.csv fnv1a64:[0-9a-f]\{16\} (13 points" out
sim_id=$(sed -n 's/.*"run_id": \([0-9]*\).*/\1/p' out)
check sim_fit_options test "$(val "$DB" "SELECT json_extract(options, '\$.convergence_fit_id') || ' ' || (json_extract(options, '\$.convergence_source') LIKE 'convergence_fit $mlp_fit: mlp.csv %') FROM run WHERE id = ${sim_id:-0}")" = "$mlp_fit 1"
expect_exit sim_fit_text 0 "$H" "${S[@]}" --db "$DB"
check sim_fit_text_says grep -q "^  convergence      convergence_fit $mlp_fit: mlp.csv" out
# A target accuracy or loss takes the same fit.
expect_exit sim_fit_target 0 "$H" sim --cluster "$C" --model mlp --policy ssgd --global-batch 512 --convergence analytic --target-loss 0.5 --db "$DB" --json
check sim_fit_target_time python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["time_to_target_s"] > 0 and d["final_loss"] <= 0.5 and d["convergence_source"].startswith("convergence_fit"), d' out
# Keys in --convergence still win, and say so; a --convergence-params file replaces the fit.
printf 'beta2=0.5\nbeta0=1\nbeta1=1\nphi=1e12\n' >p.conf
expect_exit sim_file 0 "$H" "${S[@]}" --convergence-params p.conf --db "$DB" --json
check sim_file_source grep -q "\"convergence_source\": \"--convergence-params p.conf\"" out
check sim_file_loss python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); k=200*512/60000; assert abs(d["final_loss"] - (1/(k+1)+0.5)) < 1e-9, d' out
expect_exit sim_fit_override 0 "$H" sim --cluster "$C" --model mlp --policy ssgd --global-batch 512 --iterations 200 --convergence analytic:beta2=0.25 --db "$DB" --json
check sim_fit_override_loss python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); k=200*512/60000; assert abs(d["final_loss"] - (1/(4*k+0.4)+0.25)) < 1e-6, d' out
check sim_fit_override_says grep -q "\"convergence_source\": \"convergence_fit $mlp_fit: .*; set in --convergence: beta2\"" out
# Another model's fit is not used: resnet18 has none, so the table's defaults, and it says so.
expect_exit sim_other_model 0 "$H" sim --cluster "$C" --model resnet18 --policy ssgd --global-batch 512 --iterations 5 --convergence analytic --db "$DB" --json
check sim_other_model_says grep -q '"convergence_source": "illustrative defaults, not fitted' out
# The fit is found in the --calib database too, and progress is counted in the run's data set:
# stated in epochs of 30,000 samples the same curve has beta0 2, which the run, counting epochs of
# mlp's 60,000, scales to 4: the loss after a number of samples stays the curves'.
expect_exit fit_calib_db 0 "$H" fit-convergence --curves mlp.csv --model mlp --dataset-size 30000 --convergence analytic:phi=1e12 --db "$T/calib.db"
expect_exit sim_calib_fit 0 "$H" "${S[@]}" --db "$T/other.db" --calib "$T/calib.db" --json
check sim_calib_fit_loss python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); k=200*512/60000; assert abs(d["final_loss"] - (1/(4*k+0.4)+0.35)) < 1e-6 and "rescaled" in d["convergence_source"], d' out
check fit_calib_db_beta0 test "$(val "$T/calib.db" "SELECT round(json_extract(params, '\$.beta0'), 6) || ' ' || json_extract(params, '\$.dataset_size') FROM convergence_fit")" = "2.0 30000"
# A database without fits: mlp's built-in fit, and it says so.
expect_exit sim_none_db 0 "$H" "${S[@]}" --db "$T/fresh.db" --json
check sim_none_db_builtin grep -q '"convergence_source": "built-in fit of mlp to proxy runs' out

# --- bad CSVs: exit 2 with FILE:LINE, nothing stored, no --out written --------------------------
n=$(val "$DB" "SELECT count(*) FROM convergence_fit")
bad_csv() { # NAME TEXT MESSAGE (a grep pattern)
  printf '%b' "$2" >"$1.csv"
  expect_exit "bad_$1" 2 "$H" fit-convergence --curves "$1.csv" --model mynet --dataset-size 60000 --db "$DB" --out "$1.conf"
  check "bad_$1_says" grep -q -- "$3" err
  check "bad_$1_no_out" test ! -e "$1.conf"
}
bad_csv no_loss 'samples,batch\n0,32\n' "no_loss.csv:1: the header row needs columns loss, batch and samples or epoch"
bad_csv nan_loss 'samples,loss,batch\n0,2.3,32\n1000,abc,32\n' 'nan_loss.csv:3: loss: expected a number >= 0, got "abc"'
bad_csv fields 'samples,loss,batch\n0,2.3,32\n\n1000,2.0\n' "fields.csv:4: expected 3 fields as in the header, got 2"
bad_csv acc 'samples,loss,accuracy,batch\n0,2.3,85,32\n' 'acc.csv:2: accuracy: expected a fraction in \[0, 1\], got "85"'
bad_csv policy 'samples,loss,batch,policy\n0,2.3,32,ssp\n' 'policy.csv:2: policy: expected ssgd, ddp or lbb (synchronous), asp or localsgd, got "ssp"'
bad_csv no_period 'samples,loss,batch,policy,period\n0,2.3,32,ssgd,\n0,2.3,32,localsgd,\n' 'no_period.csv:3: a localsgd row needs a period'
bad_csv no_period_col 'samples,loss,batch,policy\n0,2.3,32,localsgd\n' 'no_period_col.csv:2: a localsgd row needs a period'
bad_csv sync_period 'samples,loss,batch,policy,period\n0,2.3,32,ddp,4\n' 'sync_period.csv:2: period: only localsgd rows average every period steps; a ddp row.s period is 1, got "4"'
bad_csv period 'samples,loss,batch,policy,period\n0,2.3,32,localsgd,2.5\n' 'period.csv:2: period: expected a positive integer (local steps between model averages), got "2.5"'
bad_csv batch '# a comment\nsamples,loss,batch\n0,2.3,0\n' 'batch.csv:3: batch: expected a positive integer'
bad_csv workers 'samples,loss,batch,workers\n0,2.3,32,1.5\n' 'workers.csv:2: workers: expected a positive integer'
bad_csv neg 'samples,loss,batch\n-5,2.3,32\n' 'neg.csv:2: samples: expected a number >= 0'
bad_csv empty '' "empty.csv:1: no header row"
bad_csv header_only 'samples,loss,batch\n' "header_only.csv:1: no rows after the header"
bad_csv twice 'samples,loss,loss,batch\n' 'twice.csv:1: column "loss" given twice'
bad_csv quote 'samples,loss,batch,policy\n0,2.3,32,"ssgd\n' "quote.csv:2: a quote is not closed"
bad_csv neither 'samples,epoch,loss,batch\n,,2.3,32\n' "neither.csv:2: neither samples nor epoch is given"
bad_csv disagree 'samples,epoch,loss,batch\n6000,0.1,2.3,32\n12000,0.1,2.0,32\n' "disagree.csv:3: samples / epoch = 120000, but --dataset-size says 60000"
bad_csv huge_samples 'samples,loss,batch\n2e18,2.3,32\n' 'huge_samples.csv:2: samples: expected a number >= 0 and at most 1e18, got "2e18"'
bad_csv huge_epoch 'epoch,loss,batch\n0,2.3,32\n1e300,2.0,32\n' "huge_epoch.csv:3: epoch: 1e+300 epochs of 60000 samples are more than 1e18 samples"
# Samples per epoch from a row that cannot give them (found by fuzz_curves: an epoch of 1e308
# made the samples infinite).
printf 'samples,epoch,loss,batch\n0,0.5,2.3,32\n' >zero_rate.csv
expect_exit bad_zero_rate 2 "$H" fit-convergence --curves zero_rate.csv --model mynet --db "$DB"
check bad_zero_rate_says grep -q "zero_rate.csv:2: samples / epoch = 0: not a number of samples per epoch" err
expect_exit bad_disagree_size 2 "$H" fit-convergence --curves disagree.csv --model mynet --db "$DB"
check bad_disagree_size_says grep -q "disagree.csv:3: samples / epoch = 120000, but line 2 gives 60000" err
# Epochs rounded to 6 decimals, as tools/hetsim_profile.py writes them: the data set's size comes
# from the row of the most epochs (here exactly 60,000; the first row alone gives 60,000.1).
printf 'samples,epoch,loss,accuracy,batch\n0,0.0,2.3,0.1,128\n6016,0.100267,0.62,0.77,128\n12032,0.200533,0.53,0.81,128\n89984,1.499733,0.40,0.85,128\n179968,2.999467,0.34,0.88,128\n' > rounded.csv
expect_exit rounded_epochs 0 "$H" fit-convergence --curves rounded.csv --model mynet --db "$T/rounded.db" --json
check rounded_epochs_size python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dataset_size"] == 60000, d["dataset_size"]' out
bad_csv few 'samples,loss,batch\n0,2.3,32\n1000,2.0,32\n' "3 parameters"
expect_exit bad_missing_file 2 "$H" fit-convergence --curves nope.csv --model mynet --db "$DB"
expect_exit bad_no_model 2 "$H" fit-convergence --curves c.csv --db "$DB"
check bad_no_model_says grep -q -- "--curves needs --model NAME" err
expect_exit bad_runs_and_curves 2 "$H" fit-convergence 1 --curves c.csv --model mynet --db "$DB"
expect_exit bad_model_without_curves 2 "$H" fit-convergence 1 --model mynet --db "$DB"
expect_exit bad_dataset_size 2 "$H" fit-convergence --curves c.csv --model mynet --dataset-size 0 --db "$DB"
check bad_nothing_stored test "$(val "$DB" "SELECT count(*) FROM convergence_fit")" = "$n"

cli_finish
