#!/usr/bin/env bash
# The paths of the checks against PyTorch DDP (bench/bench_ddp.sh, QUICK=1): profile cnn the way
# DDP runs it, import the profile, simulate the cluster built on it, run real DDP with the same
# batches (homogeneous, one rank slowed, LBB's static solve's batches and those it tunes to). It
# checks that every step runs and writes numbers, not the numbers themselves
# (docs/performance.md has those, on a quiet machine). Then bench/bench_ddp_accuracy.sh, QUICK=1:
# time to an accuracy, predicted for a network outside the zoo and trained for real with DDP (and
# with PyTorch's local SGD);
# bench/bench_acc_seeds.sh, small: iterations to a target over seeds; and bench/bench_localsgd.sh,
# small: local SGD's local steps to a target, PyTorch's against hetsim's with lambda_tau fitted.
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "skip: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"
  exit 77
fi
QUICK=1 bash "$SRC/bench/bench_ddp.sh" "$HETSIM" "$TMP/ddp" >"$TMP/out" 2>"$TMP/err"
check bench_runs test $? -eq 0 || head -c 2000 "$TMP/err"
check table_printed grep -qE '^median lbb +error [-+][0-9.]+' "$TMP/out"
check results_complete /usr/bin/python3 -c '
import json, math, sys
r = json.load(open(sys.argv[1]))
assert set(r["cases"]) == {"homo", "slow", "lbb_static", "lbb", "lbb_smooth"}, r["cases"].keys()
for c in r["cases"].values():
    for k in ("ddp_mean_iteration_s", "sim_mean_iteration_s", "error", "ddp_compute_spread"):
        assert math.isfinite(c[k]), (k, c)
    assert c["ddp_mean_iteration_s"] > 0 and c["sim_mean_iteration_s"] > 0
assert sum(r["lbb_batches"]) == 2 * r["batch_per_rank"], r["lbb_batches"]
assert sum(r["lbb_static_batches"]) == 2 * r["batch_per_rank"], r["lbb_static_batches"]
assert sum(r["lbb_smooth_batches"]) == 2 * r["batch_per_rank"], r["lbb_smooth_batches"]
' "$TMP/ddp/results.json"
check imported_device test "$(rows "$TMP/ddp/pass1/cal.db" "SELECT count(*) FROM comm_model WHERE backend = 'gloo' AND op = 'allreduce' AND world_size = 2")" = 1
# the gradient's all-reduce as DDP issued it in the profile (--comm-step), stored with its mean
check step_allreduce_imported test "$(rows "$TMP/ddp/pass1/cal.db" "SELECT count(*) FROM comm_sample WHERE backend = 'gloo' AND op = 'allreduce_step' AND world_size = 2 AND mean_s > 0 AND bytes = $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["grad_bytes"])' "$TMP/ddp/pass1/profile.json")")" = 1

# Time to accuracy (bench/bench_ddp_accuracy.sh, QUICK=1): a network outside the zoo profiled,
# its Fashion-MNIST curves fitted, hetsim's time to a low target against DDP's trained to it.
QUICK=1 bash "$SRC/bench/bench_ddp_accuracy.sh" "$HETSIM" "$TMP/acc" >"$TMP/out" 2>"$TMP/err"
check accuracy_bench_runs test $? -eq 0 || head -c 2000 "$TMP/err"
check accuracy_table_printed grep -qE '^\| lbb \| [-+][0-9.]+ \| [-+][0-9.]+ \|' "$TMP/out"
check accuracy_results /usr/bin/python3 -c '
import json, math, sys
r = json.load(open(sys.argv[1] + "/results.json"))
assert set(r) == {"homo", "slow", "lbb", "local"}, r.keys()
for name, c in r.items():
    p = c["passes"][0]
    assert p["sim_time_s"] > 0 and p["ddp_time_s"] > 0 and p["sim_iterations"] > 0 and p["ddp_iterations"] > 0, (name, p)
    assert math.isfinite(c["time_error"]), (name, c)
    d = json.load(open(sys.argv[1] + "/pass1/" + name + ".ddp.json"))
    assert d["target_reached"] and d["data"] == "fashion-mnist", name
    t = [e["train_time_s"] for e in d["evals"]]
    assert t == sorted(t) and t[0] == 0 and d["evals"][0]["iter"] == 0, (name, t)
    assert sum(p["batches"]) == 2 * 64, p["batches"]
assert json.load(open(sys.argv[1] + "/pass1/local.ddp.json"))["local_period"] == 5
' "$TMP/acc"
check accuracy_fit_stored test "$(rows "$TMP/acc/pass1/cal.db" "SELECT count(*) FROM convergence_fit WHERE model = 'usernet'")" = 1

# Iterations to a target over seeds (bench/bench_acc_seeds.sh), small: 2 seeds of 100 iterations,
# low targets; hetsim from the committed one-seed curves, noisy and noise-free.
SEEDS=2 ITERATIONS=100 TARGETS="0.6 0.7" NOISE_FROM=50 bash "$SRC/bench/bench_acc_seeds.sh" "$HETSIM" "$TMP/seeds" >"$TMP/out" 2>"$TMP/err"
check seeds_bench_runs test $? -eq 0 || head -c 2000 "$TMP/err"
check seeds_results /usr/bin/python3 -c '
import csv, json, sys
r = json.load(open(sys.argv[1] + "/results.json"))
assert [t["target"] for t in r["targets"]] == [0.6, 0.7] and r["fit"]["params"]["acc_noise"] > 0, r
for t in r["targets"]:
    assert t["seeds"] == 2 and t["fitted"] > 0 and t["noisefree"] >= t["fitted"], t
rows = list(csv.DictReader(open(sys.argv[1] + "/evals.csv")))
assert len(rows) == 2 * 5 and {r["seed"] for r in rows} == {"1", "2"}, len(rows)
' "$TMP/seeds"

# Local SGD (bench/bench_localsgd.sh), small: 2 ranks x 16, periods 1 (DDP) and 4, 2 seeds of 32
# iterations evaluated every 4; hetsim fitted to seed 1's curves at both periods.
SEEDS=2 TAUS="1 4" FIT_TAUS="1 4" RANKS=2 BATCH=16 ITERATIONS=32 MIN_ITERATIONS=32 EVAL_EVERY=4 TARGET_LOSSES=1.5 \
  TARGET_ACCS=0.5 bash "$SRC/bench/bench_localsgd.sh" "$HETSIM" "$TMP/local" >"$TMP/out" 2>"$TMP/err"
check local_bench_runs test $? -eq 0 || head -c 2000 "$TMP/err"
check local_results /usr/bin/python3 -c '
import csv, json, sys
r = json.load(open(sys.argv[1] + "/results.json"))
assert [(x["tau"], x["kind"]) for x in r["rows"]] == [(1, "loss"), (1, "acc"), (4, "loss"), (4, "acc")], r["rows"]
for x in r["rows"]:
    assert x["seeds"] == 1 and all(x[v] > 0 for v in ("fitted", "ddp-only", "no-penalty")), x
assert "lambda_tau" in r["fits"]["fitted"]["fitted"] and "lambda_tau" not in r["fits"]["ddp-only"]["fitted"], r["fits"]
assert r["fits"]["ddp-only"]["params"]["lambda_tau"] == 0.05, r["fits"]["ddp-only"]["params"]
rows = list(csv.DictReader(open(sys.argv[1] + "/evals.csv")))
assert len(rows) == 2 * 2 * 9 and {(x["tau"], x["seed"]) for x in rows} == {(t, s) for t in "14" for s in "12"}, len(rows)
cur = list(csv.DictReader(open(sys.argv[1] + "/curves-fitted.csv")))
assert {(x["policy"], x["period"]) for x in cur} == {("ddp", ""), ("localsgd", "4")}, cur[:3]
' "$TMP/local"
cli_finish
