#!/usr/bin/python3
"""Convert Sailor's per-layer profiles into hetsim profiles (format v1), and Sailor's network
fits into link bandwidths and latencies.

Source: eth-easl/sailor (MIT). Python 3 standard library only. SRC is a folder with Sailor's
repository layout (a checkout, `git archive` of it, or tests/data/sailor-excerpt), from which
these files are read:
  sailor/Planner/sailor_planner/profiles/<MODEL>/<GPU>/profile.json   per-layer times
  sailor/Planner/llm_info.json                       per-layer parameters and activations
  sailor/Planner/simulations/configs/training_config_*.json   optimizer, layers, sequence
  sailor/Planner/simulations/constants.py            GPU_MEMORY_GB (read as data, not run)
  sailor/providers/network_coeffs_all_homo.json      network fits (--network only)

What the source says, as read from Sailor's code (see traces/profiles/README.md):
- profile.json maps micro-batch size -> tensor-parallel degree -> layer index -> [forward,
  backward, update] in seconds (third_party/Megatron-DeepSpeed/megatron/training.py times layers
  with CUDA events, /1000, and averages iterations 6-10 of 10). Layer 0 is the embedding, the
  last layer the head with the loss; Sailor profiles two transformer blocks and writes the second
  one's times for every further block, so every layer is listed.
- The update value is the optimizer step of the profiled run, repeated in every layer; Sailor's
  simulator (Planner/simulations/runtime_simulator.py, get_time_per_pipeline) charges it once per
  pipeline stage, taken from the stage's first layer. With one stage and one micro-batch the
  step time is sum over layers of (forward + backward) + update of layer 0: what this converts,
  at tensor-parallel degree 1 (data parallelism).
- Memory, as Sailor decides it (runtime_simulator.py check_config_fits, the same as the C++
  planner's check_stage_fits): a stage fits when P*m + A*b*f + 2.0e9 <= GPU_MEMORY_GB * 2^30,
  P the stage's parameters, A its activation floats per sample (llm_info.json), b the
  micro-batch, f = 4 bytes (fp32: Sailor's simulator default, and the profiles ran without
  fp16), m = 8 (Adam; 4 for SGD) + 4 (fp32 model) + 4 (gradients) + 4 (communication) + 4
  (DeepSpeed's extra copies) bytes. The first micro-batch that does not fit is the profile's
  oom_batch; measured micro-batches at or above it are not converted (listed under "extra").
  A (model, GPU) pair where no micro-batch fits at degree 1 is not written.

Usage:
  convert_sailor.py --src SRC --out DIR [--commit SHA] [--created-at ISO]
  convert_sailor.py --src SRC --network [--json]
Exit status: 0 done; 2 bad input or usage (nothing written).
"""

import argparse
import ast
import datetime
import glob
import json
import math
import os
import re
import sys
import tempfile

TOOL = "convert_sailor.py 1"
REPOSITORY = "eth-easl/sailor"
LICENCE = ("MIT License. Copyright (c) 2023 - present | ETH Zurich. "
           "Full text: traces/profiles/LICENSE.sailor")

PROFILES = "sailor/Planner/sailor_planner/profiles"
LLM_INFO = "sailor/Planner/llm_info.json"
CONFIGS = "sailor/Planner/simulations/configs"
CONSTANTS = "sailor/Planner/simulations/constants.py"
NETWORK = "sailor/providers/network_coeffs_all_homo.json"

# Sailor's bytes for a parameter besides the optimizer state (runtime_simulator.py).
MODEL_COPY, GRADIENTS, COMM, DS_COPIES = 4, 4, 4, 4
MEGATRON_MEM_TP1 = 2000000000      # "extra mem needed by megatron" at tensor-parallel degree 1
FLOAT_SIZE = 4                     # fp32

# Sailor GPU name -> (folder, device object, note). Published specifications; memory is Sailor's
# own GPU_MEMORY_GB figure (GiB), the one its memory decision uses.
GPUS = {
    "A100-40": ("a100-40", "NVIDIA A100 40GB (Sailor)", 108, "8.0",
                "A100: 108 SMs, compute capability 8.0 (NVIDIA A100 Tensor Core GPU "
                "Architecture whitepaper, 2020)."),
    "A100-80": ("a100-80", "NVIDIA A100 80GB (Sailor)", 108, "8.0",
                "A100: 108 SMs, compute capability 8.0 (NVIDIA A100 Tensor Core GPU "
                "Architecture whitepaper, 2020)."),
    "GH-96": ("gh200-96", "NVIDIA GH200 96GB, H100 GPU (Sailor)", 132, "9.0",
              "GH200 Grace Hopper superchip with 96 GB HBM3; its H100 GPU has 132 SMs, compute "
              "capability 9.0 (NVIDIA GH200 Grace Hopper Superchip datasheet; NVIDIA H100 "
              "Tensor Core GPU Architecture whitepaper, 2022)."),
    "V100-16": ("v100-16", "NVIDIA Tesla V100 16GB (Sailor)", 80, "7.0",
                "V100: 80 SMs, compute capability 7.0 (NVIDIA Tesla V100 GPU Architecture "
                "whitepaper, 2017)."),
    "RTX-3090": ("rtx-3090", "NVIDIA GeForce RTX 3090 (Sailor)", 82, "8.6",
                 "RTX 3090: 82 SMs, 24 GB, compute capability 8.6 (NVIDIA Ampere GA102 GPU "
                 "Architecture whitepaper, 2020)."),
    "Titan-RTX": ("titan-rtx", "NVIDIA TITAN RTX (Sailor)", 72, "7.5",
                  "TITAN RTX: 72 SMs, 24 GB, compute capability 7.5 (NVIDIA Turing GPU "
                  "Architecture whitepaper, 2018)."),
    "RTX-2080": ("rtx-2080", "NVIDIA GeForce RTX 2080 (Sailor)", None, "7.5",
                 "Sailor names it RTX-2080 but gives it 11 GB, the RTX 2080 Ti's memory (the "
                 "RTX 2080 has 8 GB), so the SM count (46 or 68) is left null; Turing, compute "
                 "capability 7.5."),
}

# Sailor model name -> hetsim model name.
MODEL_NAMES = {
    "OPT-350": "opt-350m",
    "GPT-Neo-2.7": "gpt-neo-2.7b",
    "LLAMA-3-8": "llama-3-8b",
    "OPT-30": "opt-30b",
}


class InputError(Exception):
    pass


def rel(src, path):
    return os.path.relpath(path, src)


def load_json(src, path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError("%s: cannot read: %s" % (rel(src, path), e.strerror))
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError("%s:%d:%d: not JSON: %s" % (rel(src, path), e.lineno, e.colno, e.msg))


def is_num(x):
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def is_int(x):
    return not isinstance(x, bool) and isinstance(x, int)


def gpu_memory(src):
    """GPU_MEMORY_GB from Sailor's constants.py, read as a literal (the file is not run)."""
    path = os.path.join(src, CONSTANTS)
    try:
        with open(path, "r", encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except OSError as e:
        raise InputError("%s: cannot read: %s" % (CONSTANTS, e.strerror))
    except SyntaxError as e:
        raise InputError("%s:%s: not Python: %s" % (CONSTANTS, e.lineno, e.msg))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "GPU_MEMORY_GB"):
            try:
                val = ast.literal_eval(node.value)
            except ValueError:
                val = None
            if (not isinstance(val, dict) or not all(isinstance(k, str) and is_num(v) and v > 0
                                                     for k, v in val.items())):
                raise InputError("%s:%d: GPU_MEMORY_GB: expected a dict of GPU name to "
                                 "positive GB" % (CONSTANTS, node.lineno))
            return val
    raise InputError("%s: no GPU_MEMORY_GB" % CONSTANTS)


def training_configs(src):
    """{sailor model name: (config dict, relative path)} from simulations/configs/."""
    out = {}
    for path in sorted(glob.glob(os.path.join(src, CONFIGS, "training_config_*.json"))):
        doc = load_json(src, path)
        r = rel(src, path)
        if not isinstance(doc, dict):
            raise InputError("%s: $: expected an object" % r)
        for key, test, what in (("model", lambda v: isinstance(v, str), "a string"),
                                ("optimizer", lambda v: isinstance(v, str), "a string"),
                                ("num_all_layers", lambda v: is_int(v) and v > 0,
                                 "a positive integer"),
                                ("sequence_length", lambda v: is_int(v) and v > 0,
                                 "a positive integer")):
            if key not in doc or not test(doc[key]):
                raise InputError("%s: $.%s: expected %s" % (r, key, what))
        out[doc["model"]] = (doc, r)
    return out


def llm_info(src):
    path = os.path.join(src, LLM_INFO)
    doc = load_json(src, path)
    if not isinstance(doc, dict):
        raise InputError("%s: $: expected an object of models" % LLM_INFO)
    return doc


def model_memory(info, model):
    """(P, A, layers) at tensor-parallel degree 1: parameters and activation floats per sample,
    summed over the layers (llm_info.json)."""
    if model not in info or not isinstance(info[model], dict):
        return None
    tp1 = info[model].get("1")
    if not isinstance(tp1, dict) or not tp1:
        return None
    P = A = 0
    for layer, rec in tp1.items():
        where = "%s: $[%s][\"1\"][%s]" % (LLM_INFO, json.dumps(model), json.dumps(layer))
        if not isinstance(rec, dict):
            raise InputError("%s: expected an object" % where)
        for key in ("params_floats", "act_mem_floats"):
            if not is_int(rec.get(key)) or rec[key] < 0:
                raise InputError("%s.%s: expected an integer >= 0, got %s"
                                 % (where, key, json.dumps(rec.get(key))))
        P += rec["params_floats"]
        A += rec["act_mem_floats"]
    return P, A, len(tp1)


def read_profile(src, path):
    """{mbs: {tp: [(layer, fwd, bwd, upd)...]}} with every number checked."""
    doc = load_json(src, path)
    r = rel(src, path)
    if not isinstance(doc, dict):
        raise InputError("%s: $: expected an object of micro-batch sizes" % r)
    out = {}
    for mbs, per_tp in doc.items():
        if not re.match(r"^[1-9][0-9]*$", mbs) or not isinstance(per_tp, dict):
            raise InputError("%s: $[%s]: expected a micro-batch size mapping tensor-parallel "
                             "degrees" % (r, json.dumps(mbs)))
        for tp, layers in per_tp.items():
            where = "%s: $[%s][%s]" % (r, json.dumps(mbs), json.dumps(tp))
            if not re.match(r"^[1-9][0-9]*$", tp) or not isinstance(layers, dict) or not layers:
                raise InputError("%s: expected a tensor-parallel degree mapping layers" % where)
            rows = []
            for layer, v in layers.items():
                lw = "%s[%s]" % (where, json.dumps(layer))
                if not re.match(r"^(0|[1-9][0-9]*)$", layer):
                    raise InputError("%s: expected a layer index" % lw)
                if (not isinstance(v, list) or len(v) != 3
                        or not all(is_num(x) and x >= 0 for x in v)):
                    raise InputError("%s: expected [forward, backward, update] seconds >= 0, "
                                     "got %s" % (lw, json.dumps(v)))
                rows.append((int(layer), v[0], v[1], v[2]))
            rows.sort()
            if [row[0] for row in rows] != list(range(len(rows))):
                raise InputError("%s: layers are not numbered 0..%d" % (where, len(rows) - 1))
            out.setdefault(int(mbs), {})[int(tp)] = rows
    return out


def step_times(rows):
    """Sailor's arithmetic for one stage and one micro-batch: acc += fwd + bwd over the layers,
    plus the update of the stage's first layer."""
    fwd = bwd = acc = 0.0
    for _, f, b, _ in rows:
        fwd += f
        bwd += b
        acc += (f + b)
    upd = rows[0][3]
    return fwd, bwd, upd, acc + upd


def convert(src, args, command):
    mem_gb = gpu_memory(src)
    configs = training_configs(src)
    info = llm_info(src)
    docs, skipped = {}, []
    for path in sorted(glob.glob(os.path.join(src, PROFILES, "*", "*", "profile.json"))):
        gpu = os.path.basename(os.path.dirname(path))
        model = os.path.basename(os.path.dirname(os.path.dirname(path)))
        r = rel(src, path)
        prof = read_profile(src, path)
        pair = "%s on %s" % (model, gpu)
        if model not in MODEL_NAMES:
            skipped.append("%s: no hetsim name for model %s" % (pair, model))
            continue
        if gpu not in GPUS or gpu not in mem_gb:
            skipped.append("%s: GPU %s has no specification here or no GPU_MEMORY_GB in %s"
                           % (pair, gpu, CONSTANTS))
            continue
        mem = model_memory(info, model)
        if mem is None:
            skipped.append("%s: no tensor-parallel degree 1 entry in %s" % (pair, LLM_INFO))
            continue
        P, A, info_layers = mem
        if model not in configs:
            # Without the optimizer, the least memory Sailor could charge is SGD's.
            least = P * (4 + MODEL_COPY + GRADIENTS + COMM + DS_COPIES) + MEGATRON_MEM_TP1 \
                + A * FLOAT_SIZE
            cap = int(round(mem_gb[gpu] * 2**30))
            if least > cap:
                skipped.append("%s: no micro-batch fits at tensor-parallel degree 1 under "
                               "Sailor's memory model, even with SGD (micro-batch 1 needs at "
                               "least %d bytes, the GPU has %d)" % (pair, least, cap))
            else:
                skipped.append("%s: no training config in %s (optimizer and layers unknown)"
                               % (pair, CONFIGS))
            continue
        cfg, cfg_path = configs[model]
        n_layers = cfg["num_all_layers"]
        tp1 = {mbs: per_tp[1] for mbs, per_tp in prof.items() if 1 in per_tp}
        if not tp1:
            skipped.append("%s: no tensor-parallel degree 1 in the profile" % pair)
            continue
        bad = sorted({len(rows) for rows in tp1.values()} - {n_layers})
        if bad or info_layers != n_layers:
            skipped.append("%s: the profile has %s layers, the model %d (%s) and %s %d: not "
                           "this model's profile" % (pair, "/".join(map(str, bad)) or n_layers,
                                                     n_layers, cfg_path, LLM_INFO, info_layers))
            continue
        optim_bytes = 4 if cfg["optimizer"].lower() == "sgd" else 8
        per_param = optim_bytes + MODEL_COPY + GRADIENTS + COMM + DS_COPIES
        cap = int(round(mem_gb[gpu] * 2**30))
        fixed = P * per_param + MEGATRON_MEM_TP1
        per_sample = A * FLOAT_SIZE
        max_fit = (cap - fixed) // per_sample if cap >= fixed else 0
        if max_fit < 1:
            skipped.append("%s: no micro-batch fits at tensor-parallel degree 1 under Sailor's "
                           "memory model (micro-batch 1 needs %d bytes, the GPU has %d)"
                           % (pair, fixed + per_sample, cap))
            continue
        oom_batch = max_fit + 1
        compute, unfit, upd_missing = [], [], False
        for mbs in sorted(tp1):
            if mbs > max_fit:
                unfit.append(mbs)
                continue
            fwd, bwd, upd, step = step_times(tp1[mbs])
            if step <= 0 or fwd <= 0 or bwd <= 0:
                raise InputError("%s: $[\"%d\"][\"1\"]: forward and backward must sum above 0"
                                 % (r, mbs))
            for phase, t in (("forward", fwd), ("backward", bwd), ("update", upd),
                             ("step", step)):
                if phase == "update" and t == 0:
                    upd_missing = True
                    continue
                compute.append({"batch": mbs, "phase": phase, "median_s": t, "p10_s": None,
                                "p90_s": None, "count": 1, "peak_memory_bytes": None})
        if not compute:
            skipped.append("%s: no measured micro-batch at or below %d, the largest that fits"
                           % (pair, max_fit))
            continue
        folder, dev_name, sms, cc, dev_note = GPUS[gpu]
        name = MODEL_NAMES[model]
        notes = (
            "Sailor's profile of %s on %s at tensor-parallel degree 1: for each micro-batch "
            "b, forward = sum of the layers' forward times, backward = sum of their backward "
            "times, update = layer 0's optimizer time, step = the sum of the three, as Sailor's "
            "simulator charges one pipeline stage and one micro-batch "
            "(Planner/simulations/runtime_simulator.py). Seconds; each figure a mean of "
            "iterations 6-10 of a 10-iteration profiling run (Megatron-DeepSpeed training.py), "
            "not a median: count 1, p10/p90 null. The profiled model had 2 transformer blocks; "
            "Sailor repeats the second block's times for the others, and its update time is "
            "that of the 2-block model's optimizer step, so it understates a full model's. "
            "%s"
            "Memory: Sailor's rule (runtime_simulator.py check_config_fits) with P = %d "
            "parameters, A = %d activation floats per sample (%s, degree 1), %s: %d bytes per "
            "parameter, 4-byte floats, 2.0e9 bytes for Megatron, GPU_MEMORY_GB[%s] = %s GiB "
            "(%s): micro-batches up to %d fit, so oom_batch = %d. "
            "Device: %s" % (
                model, gpu,
                "The source gives no update time for this GPU (0.0 in every layer): no update "
                "entry, step = forward + backward. " if upd_missing else "",
                P, A, LLM_INFO, cfg["optimizer"], per_param, gpu, mem_gb[gpu], CONSTANTS,
                max_fit, oom_batch, dev_note))
        doc = {
            "format": "hetsim-profile",
            "version": 1,
            "created_at": args.created_at,
            "tool": TOOL,
            "source": {
                "repository": REPOSITORY,
                "commit": args.commit,
                "file": r,
                "licence": LICENCE,
                "notes": notes,
                "command": command,
                "also_read": [LLM_INFO, cfg_path, CONSTANTS],
            },
            "device": {"name": dev_name, "kind": "cuda", "memory_bytes": cap,
                       "sm_count": sms, "compute_capability": cc},
            "model": {
                "name": name,
                "origin": "Sailor %s (Megatron-DeepSpeed GPT: %d layers, hidden %s, %s heads, "
                          "vocabulary %s)" % (model, cfg.get("num_layers", 0),
                                              cfg.get("hidden_size"), cfg.get("heads"),
                                              cfg.get("vocab_size")),
                "params": P,
                "grad_bytes": P * FLOAT_SIZE,
                "flops_per_sample": None,
                "input": "%d tokens per sample" % cfg["sequence_length"],
                "loss": "cross_entropy",
                "description": "params: the sum of Sailor's per-layer parameter counts at "
                               "degree 1 (the head counted apart from the embedding, as "
                               "Sailor's all-reduce estimate counts them); fp32 gradients. "
                               "FLOPs: not in the source, null.",
            },
            "execution": {"mode": "plain", "world_size": 1, "concurrent": 1,
                          "dtype": "float32", "optimizer": "adamw"},
            "compute": compute,
            "oom_batch": oom_batch,
            "extra": {"sailor_model": model, "sailor_gpu": gpu, "tensor_parallel": 1,
                      "layers": n_layers,
                      "memory_bytes_needed": {str(b): fixed + b * per_sample
                                              for b in sorted(tp1)},
                      "measured_micro_batches_not_fitting": unfit},
        }
        docs[(folder, name)] = doc
    return docs, skipped


def dump(doc):
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_all(outdir, docs):
    for (folder, name), doc in sorted(docs.items()):
        d = os.path.join(outdir, folder)
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".%s." % name, suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(dump(doc))
            os.replace(tmp, os.path.join(d, name + ".json"))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


# --- network fits ------------------------------------------------------------------------------
# Sailor fits bandwidth against message size: bw(x) [GB/s] = polyval(coeffs, log2(x / 1e6)),
# x in bytes, and charges x / (bw * 1e9) seconds for a transfer (providers/gcp/
# model_networking.py get_time_on_config; cpp_src/utils/network_utils.cpp). Its data come from
# send/recv of 2^16..2^30 bytes (profiling/networking/run_all.py). hetsim's links are a line
# t(x) = latency + x / bandwidth: the line through the fit's times at X1 and X2, the top three
# decades of the measured range (the quadratic fits of the fastest links go negative below it).
X1, X2 = 2**20, 2**30


def fit_time(coeffs, x):
    lx = math.log2(x / 1e6)
    bw = 0.0
    for c in coeffs:
        bw = bw * lx + c
    return None if bw <= 0 else (x / 1e9) / bw


def network_table(src):
    path = os.path.join(src, NETWORK)
    doc = load_json(src, path)
    rows = []
    if not isinstance(doc, dict):
        raise InputError("%s: $: expected an object" % NETWORK)
    for scope in ("inter", "intra"):
        per_gpu = doc.get(scope, {})
        if not isinstance(per_gpu, dict):
            raise InputError("%s: $.%s: expected an object" % (NETWORK, scope))
        for gpu, per_count in sorted(per_gpu.items()):
            if not isinstance(per_count, dict):
                raise InputError("%s: $.%s.%s: expected an object" % (NETWORK, scope, gpu))
            for count, val in sorted(per_count.items(), key=lambda kv: kv[0]):
                where = "%s: $.%s[%s][%s]" % (NETWORK, scope, json.dumps(gpu), json.dumps(count))
                if (not isinstance(val, list) or len(val) != 2 or not isinstance(val[0], list)
                        or not val[0] or not all(is_num(c) for c in val[0]) or not is_num(val[1])):
                    raise InputError("%s: expected [[coefficients...], max bytes/s]" % where)
                t1, t2 = fit_time(val[0], X1), fit_time(val[0], X2)
                if t1 is None or t2 is None or t2 <= t1:
                    rows.append({"scope": scope, "gpu": gpu, "gpus_per_node": count,
                                 "coefficients": val[0], "max_bytes_per_s": val[1],
                                 "bandwidth_bytes_per_s": None, "latency_s": None,
                                 "note": "the fit is not positive and increasing in time "
                                         "between 1 MiB and 1 GiB"})
                    continue
                beta = (X2 - X1) / (t2 - t1)
                alpha = t1 - X1 / beta
                rows.append({"scope": scope, "gpu": gpu, "gpus_per_node": count,
                             "coefficients": val[0], "max_bytes_per_s": val[1],
                             "time_1MiB_s": t1, "time_1GiB_s": t2,
                             "bandwidth_bytes_per_s": beta, "latency_s": alpha})
    return rows


def print_network(rows, as_json):
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print("%-5s %-9s %4s %12s %12s %14s %12s" % ("scope", "gpu", "gpus", "t(1MiB) us",
                                                 "t(1GiB) ms", "bandwidth GB/s",
                                                 "latency us"))
    for r in rows:
        if r["bandwidth_bytes_per_s"] is None:
            print("%-5s %-9s %4s  %s" % (r["scope"], r["gpu"], r["gpus_per_node"], r["note"]))
            continue
        print("%-5s %-9s %4s %12.2f %12.3f %14.4f %12.2f" % (
            r["scope"], r["gpu"], r["gpus_per_node"], r["time_1MiB_s"] * 1e6,
            r["time_1GiB_s"] * 1e3, r["bandwidth_bytes_per_s"] / 1e9, r["latency_s"] * 1e6))


def main(argv):
    ap = argparse.ArgumentParser(
        prog="convert_sailor.py",
        description="Convert Sailor's profiles into hetsim profiles (format v1), or print its "
                    "network fits as bandwidths and latencies.")
    ap.add_argument("--src", required=True, help="folder with Sailor's repository layout")
    ap.add_argument("--out", help="output folder (profiles go to OUT/<gpu>/<model>.json)")
    ap.add_argument("--network", action="store_true",
                    help="print the network fits as latency + size / bandwidth lines")
    ap.add_argument("--json", action="store_true", help="with --network: JSON")
    ap.add_argument("--commit", default="unknown", help="Sailor commit SRC was taken from")
    ap.add_argument("--created-at", default=None,
                    help="ISO-8601 UTC time written as created_at (default: now)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if args.network == bool(args.out):
        print("convert_sailor.py: give exactly one of --out DIR and --network", file=sys.stderr)
        return 2
    if not os.path.isdir(args.src):
        print("convert_sailor.py: --src %s: not a folder" % args.src, file=sys.stderr)
        return 2
    if args.network:
        try:
            rows = network_table(args.src)
        except InputError as e:
            print("convert_sailor.py: %s" % e, file=sys.stderr)
            return 2
        print_network(rows, args.json)
        return 0
    if args.created_at is None:
        args.created_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    elif not re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", args.created_at):
        print("convert_sailor.py: --created-at: expected YYYY-MM-DDTHH:MM:SSZ, got %r"
              % args.created_at, file=sys.stderr)
        return 2
    if not re.match(r"^([0-9a-f]{40}|unknown)$", args.commit):
        print("convert_sailor.py: --commit: expected 40 hex digits, got %r" % args.commit,
              file=sys.stderr)
        return 2
    command = ("/usr/bin/python3 tools/convert_sailor.py --src <eth-easl/sailor at commit %s> "
               "--out traces/profiles --commit %s --created-at %s"
               % (args.commit, args.commit, args.created_at))
    try:
        docs, skipped = convert(args.src, args, command)
    except InputError as e:
        print("convert_sailor.py: %s" % e, file=sys.stderr)
        return 2
    if not docs:
        print("convert_sailor.py: %s: nothing to convert" % args.src, file=sys.stderr)
        for s in skipped:
            print("  skipped %s" % s, file=sys.stderr)
        return 2
    write_all(args.out, docs)
    for (folder, name) in sorted(docs):
        print("wrote %s" % os.path.join(args.out, folder, name + ".json"))
    for s in skipped:
        print("skipped %s" % s, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
