#!/usr/bin/env bash
# tools/hetsim_profile.py and bench/ddp_train.py end to end on the cpu with Debian's python3-torch,
# kept small (a few steps per batch, tiny budgets): a valid version-1 profile (the importer's
# rules of docs/profile.md checked field by field), the built-in models' parameter counts
# against `hetsim models`, DDP at world size 1 with convergence curves, two concurrent processes
# with the gloo communication sweep and DDP's all-reduce (--comm-step), --rounds 2 pooling 4 processes, bad arguments (exit 2,
# nothing clobbered), and a 2-rank DDP run of 3 iterations. No timed assertion: times are checked for sanity (finite, > 0, ordered
# percentiles), not for values.
# Skips (77) only when /usr/bin/python3 cannot import torch (Makefile's TEST_DEB_PACKAGES
# installs python3-torch and python3-torchvision, so CI never skips). HETSIM_TORCH_PYTHON names
# another interpreter (torch 2.x, say).
# usage: cli_profile.sh HETSIM_BINARY SOURCE_DIR
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_PREFIX="profile."

torch_python_or_skip
PROF="$SRC/tools/hetsim_profile.py"
DDP="$SRC/bench/ddp_train.py"
loud=(--warmup 1 --min-reps 3 --max-reps 4 --budget 0.01)
quick=("${loud[@]}" --quiet)
"$HETSIM" models --json >"$TMP/zoo.json" || bad zoo_json "hetsim models --json failed"

# check_profile FILE [KEY=VALUE...]: the rules `hetsim calib import` enforces (docs/profile.md),
# and execution/model fields equal to the values given (dotted paths).
check_profile() {
  "$PY" - "$@" <<'PY'
import json, math, re, sys
path, want = sys.argv[1], sys.argv[2:]
d = json.load(open(path))
errs = []
def need(cond, msg):
    if not cond: errs.append(msg)
top = {"format", "version", "created_at", "tool", "source", "device", "model", "execution",
       "compute", "oom_batch", "comm", "extra"}
need(set(d) <= top, f"unknown top-level keys {set(d) - top}")
need(d.get("format") == "hetsim-profile", "format")
need(d.get("version") == 1 and type(d.get("version")) is int, "version")
need(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", d.get("created_at", "")), "created_at")
need(isinstance(d.get("tool"), str) and d["tool"], "tool")
dev = d["device"]
need(set(dev) <= {"name", "kind", "memory_bytes", "sm_count", "compute_capability", "driver_version",
                  "cuda_version", "cudnn_version", "nccl_version", "torch_version", "host", "threads"},
     f"unknown device keys {set(dev)}")
need(isinstance(dev.get("name"), str) and dev["name"].strip(), "device.name")
need(dev.get("kind") in ("cpu", "cuda"), "device.kind")
need(dev.get("memory_bytes") is None or (type(dev["memory_bytes"]) is int and dev["memory_bytes"] >= 0), "device.memory_bytes")
need(dev.get("sm_count") is None or (type(dev["sm_count"]) is int and dev["sm_count"] > 0), "device.sm_count")
m = d["model"]
need(set(m) <= {"name", "origin", "params", "grad_bytes", "flops_per_sample", "input", "loss", "description"},
     f"unknown model keys {set(m)}")
need(isinstance(m.get("name"), str) and m["name"], "model.name")
need(type(m.get("params")) is int and m["params"] > 0, "model.params")
need(type(m.get("grad_bytes")) is int and m["grad_bytes"] > 0, "model.grad_bytes")
f = m.get("flops_per_sample")
need(f is None or (isinstance(f, (int, float)) and f > 0 and math.isfinite(f)), "model.flops_per_sample")
ex = d["execution"]
need(set(ex) <= {"mode", "world_size", "concurrent", "dtype", "optimizer"}, f"unknown execution keys {set(ex)}")
need(ex.get("mode") in ("plain", "ddp"), "execution.mode")
need(len(d["compute"]) >= 1, "compute is empty")
steps = set()
for i, e in enumerate(d["compute"]):
    need(set(e) <= {"batch", "phase", "median_s", "p10_s", "p90_s", "count", "peak_memory_bytes",
                    "processes", "process_medians_s"}, f"compute[{i}] keys")
    need(type(e["batch"]) is int and e["batch"] > 0, f"compute[{i}].batch")
    need(e["phase"] in ("forward", "backward", "update", "step"), f"compute[{i}].phase")
    need(isinstance(e["median_s"], float) and math.isfinite(e["median_s"]) and e["median_s"] > 0, f"compute[{i}].median_s")
    need(e.get("p10_s") is None or e["p10_s"] <= e["median_s"], f"compute[{i}].p10_s")
    need(e.get("p90_s") is None or e["median_s"] <= e["p90_s"], f"compute[{i}].p90_s")
    need(type(e["count"]) is int and e["count"] > 0, f"compute[{i}].count")
    need(e.get("processes") is None or (type(e["processes"]) is int and e["processes"] > 0), f"compute[{i}].processes")
    pm = e.get("process_medians_s")
    need(pm is None or (isinstance(pm, list) and pm and all(isinstance(v, float) and v > 0 for v in pm)),
         f"compute[{i}].process_medians_s")
    if e["phase"] == "step": steps.add(e["batch"])
need(steps, "no step entry")
need(d.get("oom_batch") is None or type(d["oom_batch"]) is int, "oom_batch")
for i, c in enumerate(d.get("comm", [])):
    need(c["backend"] in ("nccl", "gloo") and c["op"] in ("allreduce", "p2p", "broadcast", "allgather", "reducescatter", "allreduce_step"), f"comm[{i}] backend/op")
    need(type(c["bytes"]) is int and c["bytes"] >= 0 and type(c["world_size"]) is int and c["world_size"] >= 2, f"comm[{i}] bytes/world_size")
    need(c["median_s"] > 0 and c["p10_s"] <= c["median_s"] <= c["p90_s"] and c["count"] > 0, f"comm[{i}] times")
    step = c["op"] == "allreduce_step"
    need(set(c) <= {"backend", "op", "world_size", "bytes", "median_s", "p10_s", "p90_s", "count", "mean_s"}
         | ({"batch", "buckets"} if step else set()), f"comm[{i}] unknown keys {set(c)}")
    need(not step or (c["bytes"] == m["grad_bytes"] and c.get("mean_s", 0) > 0 and c["count"] >= 20
                      and type(c.get("batch")) is int and type(c.get("buckets")) is int and c["buckets"] >= 1),
         f"comm[{i}] allreduce_step")
for kv in want:
    k, v = kv.split("=", 1)
    x = d
    for part in k.split("."):
        x = x[int(part)] if isinstance(x, list) else x.get(part)
    need(str(x) == v, f"{k} is {x!r}, expected {v}")
for e in errs: print(e)
sys.exit(1 if errs else 0)
PY
}

# --- a plain profile of mlp: two batches, every phase, the importer's rules ---
if "$PY" "$PROF" --model mlp --batches 16,8 --out "$TMP/mlp.json" "${quick[@]}" 2>"$TMP/err"; then
  ok plain_exit
  mlp_params=$("$PY" -c 'import json,sys; print([m["params"] for m in json.load(open(sys.argv[1])) if m["name"] == "mlp"][0])' "$TMP/zoo.json")
  check plain_valid check_profile "$TMP/mlp.json" execution.mode=plain execution.world_size=1 \
    execution.concurrent=1 device.kind=cpu model.name=mlp model.params="$mlp_params" \
    model.grad_bytes=$((4 * mlp_params)) compute.0.batch=8 compute.0.phase=forward compute.7.batch=16 \
    compute.7.phase=step oom_batch=None device.threads=1 extra.math.option=default extra.math.conv_tf32=True
  check plain_8_entries "$PY" -c 'import json,sys; sys.exit(len(json.load(open(sys.argv[1]))["compute"]) != 8)' "$TMP/mlp.json"
else
  bad plain_exit "$(head -c 400 "$TMP/err")"
fi

# --- the built-ins are hetsim's zoo: parameter counts equal, FLOPs near the zoo's 3 x forward ---
check builtin_counts "$PY" - "$PROF" "$TMP/zoo.json" <<'PY'
import json, subprocess, sys
import os
prof, zoo = sys.argv[1], {m["name"]: m for m in json.load(open(sys.argv[2]))}
bad = []
# mlp and cnn through the command line (--describe), the CIFAR models in this process (each
# command pays torch's start-up)
sys.path.insert(0, os.path.dirname(prof))
import hetsim_profile as hp
for name in ("mlp", "cnn", "resnet18", "vgg16", "mobilenetv2"):
    if name in ("mlp", "cnn"):
        out = subprocess.run([sys.executable, prof, "--model", name, "--describe"], capture_output=True, text=True)
        if out.returncode:
            bad.append(f"{name}: exit {out.returncode}: {out.stderr[-300:]}"); continue
        d = json.loads(out.stdout)
    else:
        import torch
        ms = hp.ModelSpec(name, None, None, None, None)
        m = ms.build()
        p, g, _ = hp.model_facts(ms, m)
        f, _ = hp.count_flops(ms, m, torch.device("cpu"))
        d = {"params": p, "grad_bytes": g, "flops_per_sample": f}
    z = zoo[name]
    if d["params"] != z["params"] or d["grad_bytes"] != z["grad_bytes"]:
        bad.append(f"{name}: params {d['params']}/{z['params']}, grad_bytes {d['grad_bytes']}/{z['grad_bytes']}")
    # the zoo counts elementwise layers too and a 1:2 backward; the profiler counts products only
    r = d["flops_per_sample"] / z["train_flops_per_sample"]
    if not 0.85 <= r <= 1.02:
        bad.append(f"{name}: flops {d['flops_per_sample']} against the zoo's {z['train_flops_per_sample']}")
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY

# --- DDP at world size 1, with convergence curves ---
if "$PY" "$PROF" --model cnn --batches 4 --ddp --out "$TMP/ddp.json" "${quick[@]}" \
    --curves "$TMP/curves.csv" --curve-epochs 0.1 --curve-evals 2 --curve-train-samples 2000 \
    --curve-eval-samples 200 2>"$TMP/err"; then
  ok ddp_exit
  check ddp_valid check_profile "$TMP/ddp.json" execution.mode=ddp execution.world_size=1 model.name=cnn
  check curves_header test "$(head -n 1 "$TMP/curves.csv")" = "samples,epoch,loss,accuracy,batch,workers,policy"
  check curves_rows "$PY" - "$TMP/curves.csv" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ok = len(rows) == 3 and rows[0]["samples"] == "0" and all(
    math.isfinite(float(r["loss"])) and 0 <= float(r["accuracy"]) <= 1 and r["batch"] == "64"
    and r["workers"] == "1" and r["policy"] == "ssgd" for r in rows) and int(rows[1]["samples"]) < int(rows[2]["samples"])
sys.exit(0 if ok else 1)
PY
else
  bad ddp_exit "$(head -c 400 "$TMP/err")"
fi

# --- --curve-seeds 2: each seed's curve, a seed column, the seeds in the profile ---
if "$PY" "$PROF" --model mlp --batches 4 --out "$TMP/seeds.json" "${quick[@]}" --seed 3 --curve-seeds 2 \
    --curves "$TMP/seeds.csv" --curve-epochs 0.1 --curve-evals 2 --curve-train-samples 2000 \
    --curve-eval-samples 200 2>"$TMP/err"; then
  ok curve_seeds_exit
  check curve_seeds_header test "$(head -n 1 "$TMP/seeds.csv")" = "samples,epoch,loss,accuracy,batch,workers,policy,seed"
  check curve_seeds_rows "$PY" - "$TMP/seeds.csv" "$TMP/seeds.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
seeds = [r["seed"] for r in rows]
assert seeds == ["3"] * 3 + ["4"] * 3, seeds
# another seed: other weights, so another loss at 0 samples
assert rows[0]["samples"] == rows[3]["samples"] == "0" and rows[0]["loss"] != rows[3]["loss"], rows
assert json.load(open(sys.argv[2]))["extra"]["curve_seeds"] == [3, 4]
PY
else
  bad curve_seeds_exit "$(head -c 400 "$TMP/err")"
fi

# --- two processes at once, and the gloo all-reduce and send/recv between two processes, and
# the gradient's all-reduce as DDP issues it (--comm-step: 20 steps at the least budget), under
# --math strict (recorded in extra.math) ---
if "$PY" "$PROF" --model mlp --batches 8 --concurrent 2 --comm --comm-sizes 4,64KiB \
    --comm-budget 0.01 --comm-step 8 --math strict --out "$TMP/conc.json" "${quick[@]}" 2>"$TMP/err"; then
  ok concurrent_exit
  check concurrent_valid check_profile "$TMP/conc.json" execution.concurrent=2 execution.mode=plain \
    extra.math.option=strict extra.math.conv_tf32=False extra.math.cudnn_deterministic=True \
    comm.0.backend=gloo comm.0.op=allreduce comm.0.bytes=4 comm.0.world_size=2 comm.1.op=p2p \
    comm.3.bytes=65536 comm.4.op=allreduce_step comm.4.world_size=2 comm.4.batch=8 \
    comm.4.buckets=1
  # samples are pooled over the two processes, which step in lock-step: an even count
  check concurrent_pooled "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(any(e["count"] % 2 or e["count"] < 6 for e in d["compute"]))' "$TMP/conc.json"
else
  bad concurrent_exit "$(head -c 400 "$TMP/err")"
fi

# --- --rounds 2 with two concurrent processes and a fresh pair per batch and round: each entry
# pools 4 processes' samples (its median lies between theirs), alternating order, importable ---
# (progress lines on: they show the order)
if "$PY" "$PROF" --model mlp --batches 4,8,16 --rounds 2 --concurrent 2 --process-per-batch on \
    --out "$TMP/rounds.json" "${loud[@]}" 2>"$TMP/err"; then
  ok rounds_exit
  check rounds_order test "$(sed -n 's/^hetsim_profile: \(round [0-9]\/2: batch [0-9]*\) in fresh processes$/\1/p' "$TMP/err" | paste -sd,)" \
    = "round 1/2: batch 4,round 1/2: batch 8,round 1/2: batch 16,round 2/2: batch 16,round 2/2: batch 8,round 2/2: batch 4"
  check rounds_valid check_profile "$TMP/rounds.json" execution.concurrent=2 extra.rounds=2 \
    extra.batch_order=alternating extra.process_per_batch=True compute.0.batch=4 compute.11.batch=16
  check rounds_pooled "$PY" - "$TMP/rounds.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
bad = []
for e in d["compute"]:
    pm = e["process_medians_s"]
    # 4 processes of at least --min-reps 3 steps each; the pooled median between theirs
    if e["processes"] != 4 or len(pm) != 4 or e["count"] < 12 or e["count"] % 2:
        bad.append(f"batch {e['batch']} {e['phase']}: processes {e['processes']}, {len(pm)} medians, count {e['count']}")
    if not min(pm) * (1 - 1e-12) <= e["median_s"] <= max(pm) * (1 + 1e-12):
        bad.append(f"batch {e['batch']} {e['phase']}: median {e['median_s']} outside {pm}")
for b in bad: print(b)
sys.exit(1 if bad else 0)
PY
  # the importer accepts the entries' processes and process_medians_s (checked, not stored)
  if "$HETSIM" calib import "$TMP/rounds.json" --db "$TMP/rounds.db" >"$TMP/out" 2>"$TMP/err"; then
    ok rounds_import
  else
    bad rounds_import "$(head -c 300 "$TMP/err")"
  fi
else
  bad rounds_exit "$(head -c 400 "$TMP/err")"
fi
expect_exit bad_rounds_nothing_written 2 "$PY" "$PROF" --model mlp --rounds 0 --out "$TMP/r0.json"
check bad_rounds_no_file test ! -e "$TMP/r0.json"

# --- bad arguments: exit 2, a message naming the argument, the output left alone ---
echo keep >"$TMP/keep.json"
bad_args() {
  local name=$1 text=$2
  shift 2
  expect_exit "bad_$name" 2 "$PY" "$PROF" "$@" --out "$TMP/keep.json" --quiet
  grep -qF -- "$text" "$TMP/err" || bad "bad_${name}_message" "$(head -c 300 "$TMP/err")"
}
bad_args model '--model: unknown model "resnet9000"' --model resnet9000
bad_args batches '--batches' --model mlp --batches 8,zero
bad_args input '--input' --model cnn --input 3x32
bad_args device '--device' --model mlp --device gpu0
bad_args factory 'cannot import' --model no_such_module_here:build --input 3x8x8
if "$PY" -c "import torchvision" 2>/dev/null; then
  bad_args torchvision 'no model "nope"' --model torchvision:nope
else  # a torch without torchvision (pip's torch alone): the message says so
  bad_args torchvision 'cannot import torchvision' --model torchvision:nope
fi
bad_args reps '--min-reps' --model mlp --min-reps 9 --max-reps 2
bad_args math '--math' --model mlp --math fast
bad_args rounds '--rounds: expected an integer >= 1, got "0"' --model mlp --rounds 0
bad_args rounds_text '--rounds' --model mlp --rounds two
bad_args comm_step '--comm-step needs --comm' --model mlp --comm-step 8
check kept test "$(cat "$TMP/keep.json")" = keep
expect_exit bad_outdir 2 "$PY" "$PROF" --model mlp --out "$TMP/no/such/dir.json"
check bad_outdir_message grep -qF "does not exist" "$TMP/err"

# --- real DDP: 2 ranks, unequal batches, rank 1 computing twice, 3 iterations ---
if "$PY" "$DDP" --model cnn --batches 8,4 --slowdown 1:2 --iterations 3 --warmup 1 \
    --out "$TMP/ddp_train.json" --quiet 2>"$TMP/err"; then
  ok ddp_train_exit
  check ddp_train_rows "$PY" - "$TMP/ddp_train.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows, s = d["rows"], d["summary"]
ok = (d["format"] == "hetsim-ddp-bench" and d["world_size"] == 2 and d["batches"] == [8, 4]
      and d["global_batch"] == 12 and d["slowdowns"] == [1.0, 2.0] and len(rows) == 8
      and sorted((r["rank"], r["iter"]) for r in rows) == [(r, i) for r in (0, 1) for i in range(4)]
      and all(r["iteration_s"] > 0 and r["compute_s"] > 0 and r["comm_tail_s"] >= 0 and r["buckets"] >= 1
              for r in rows)
      and all(r["slow_s"] > 0 for r in rows if r["rank"] == 1)
      and s["mean_iteration_s"] > 0 and len(s["per_rank"]) == 2)
sys.exit(0 if ok else 1)
PY
else
  bad ddp_train_exit "$(head -c 400 "$TMP/err")"
fi
# --- local SGD (--local-period T): PyTorch's averager after every T-th step. With T = 1 the
# average of the ranks' models after each step (momentum buffers their own) is DDP's step, by
# linearity: the same evaluations up to float rounding; with T = 4 the ranks drift between
# averages and the evaluations differ. lr 0.5 on random labels, so that they do.
L=(--model mlp --batches 16,16 --iterations 8 --eval-every 4 --seed 3 --lr 0.5 --quiet)
for t in ddp 1 4; do
  extra=()
  [ "$t" != ddp ] && extra=(--local-period "$t")
  expect_exit "local_sgd_$t" 0 "$PY" "$DDP" "${L[@]}" "${extra[@]}" --out "$TMP/local_$t.json"
done
check local_sgd_same_as_ddp "$PY" - "$TMP" <<'PY'
import json, sys
run = {t: json.load(open(f"{sys.argv[1]}/local_{t}.json")) for t in ("ddp", "1", "4")}
loss = {t: [e["loss"] for e in d["evals"]] for t, d in run.items()}
assert run["ddp"]["local_period"] is None and run["1"]["local_period"] == 1 and run["4"]["local_period"] == 4, run["4"]["local_period"]
assert len(loss["ddp"]) == 3 and all(abs(a - b) < 1e-4 * a for a, b in zip(loss["ddp"], loss["1"])), loss
assert abs(loss["4"][2] - loss["ddp"][2]) > 0.1, loss
assert run["4"]["comm_hook"] is False and all(r["compute_s"] is None for r in run["4"]["rows"]), run["4"]["rows"][0]
PY
# The profiler's local-SGD curve (--curve-periods 1,4: one process, two replicas averaged by
# hand) and PyTorch's PeriodicModelAverager across two gloo processes (ddp_train.py
# --local-period 4) from the same weights and samples: the same evaluations. The period-1 rows
# are the plain curve as before (no period, policy ssgd).
if [ -e "${HETSIM_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}/train-images-idx3-ubyte.gz" ]; then
  FM="fashion-mnist:${HETSIM_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
  expect_exit curve_local 0 "$PY" "$PROF" --model mlp --batches 4 --out "$TMP/cl.json" "${quick[@]}" --seed 1 \
    --curves "$TMP/cl.csv" --curve-data "$FM" --curve-batch 64 --curve-lr 0.5 --curve-epochs 0.01 --curve-evals 2 \
    --curve-periods 1,4 --curve-workers 2 --curve-eval-samples 500
  expect_exit curve_local_ddp 0 "$PY" "$DDP" --model mlp --batches 32,32 --lr 0.5 --momentum 0.9 --seed 1 --data "$FM" \
    --eval-samples 500 --eval-every 4 --iterations 8 --local-period 4 --quiet --out "$TMP/cl_ddp.json"
  check curve_local_same "$PY" - "$TMP/cl.csv" "$TMP/cl_ddp.json" "$TMP/cl.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
local = [r for r in rows if r["policy"] == "localsgd"]
assert [(r["batch"], r["workers"], r["period"]) for r in local] == [("32", "2", "4")] * 3, local
assert all(r["period"] == "" and r["workers"] == "1" and r["batch"] == "64" for r in rows if r["policy"] == "ssgd"), rows
ev = json.load(open(sys.argv[2]))["evals"]
assert [int(r["samples"]) for r in local] == [e["samples"] for e in ev] == [0, 256, 512], (local, ev)
for r, e in zip(local, ev):
    assert abs(float(r["loss"]) - e["loss"]) < 1e-5 * e["loss"] and abs(float(r["accuracy"]) - e["accuracy"]) < 1e-9, (r, e)
x = json.load(open(sys.argv[3]))["extra"]
assert x["curve_periods"] == [1, 4] and x["curve_workers"] == 2, x
PY
fi
expect_exit curve_local_bad_workers 2 "$PY" "$PROF" --model mlp --out "$TMP/x.json" --curves "$TMP/x.csv" --curve-periods 1,4 --curve-workers 1
check curve_local_bad_workers_says grep -qF -- "averages at least 2 replicas" "$TMP/err"
expect_exit curve_local_bad_split 2 "$PY" "$PROF" --model mlp --out "$TMP/x.json" --curves "$TMP/x.csv" --curve-periods 4 --curve-workers 3
check curve_local_bad_split_says grep -qF -- "--curve-batch 64: local SGD splits it evenly over --curve-workers 3" "$TMP/err"
expect_exit curve_local_bad_list 2 "$PY" "$PROF" --model mlp --out "$TMP/x.json" --curves "$TMP/x.csv" --curve-periods 1,0
expect_exit local_sgd_bad_batches 2 "$PY" "$DDP" --model mlp --batches 16,8 --local-period 2 --out "$TMP/x.json"
check local_sgd_bad_batches_says grep -qF -- "--local-period: the ranks' batches must be equal" "$TMP/err"
expect_exit local_sgd_bad_every 2 "$PY" "$DDP" --model mlp --batches 16,16 --local-period 3 --eval-every 4 --out "$TMP/x.json"
check local_sgd_bad_every_says grep -qF -- "--eval-every must be a multiple of it" "$TMP/err"
expect_exit ddp_train_bad_slowdown 2 "$PY" "$DDP" --model cnn --batches 8,4 --slowdown 2:2 --out "$TMP/x.json"
expect_exit ddp_train_bad_repeat 2 "$PY" "$DDP" --model cnn --batches 8,4 --slowdown 1:1.5 --out "$TMP/x.json"
check ddp_train_nothing_written test ! -e "$TMP/x.json"

cli_finish
