#!/usr/bin/python3
"""Convert Gavel's published single-GPU throughputs into hetsim profiles (format v1).

Source: stanford-futuredata/gavel (MIT), scheduler/simulation_throughputs.json (or
scheduler/physical_cluster_throughputs.json, same layout). Python 3 standard library only.

What the source says, as read from Gavel's code (see traces/profiles/README.md):
- The file maps a worker type ("v100", "p100", "k80"; the "*_unconsolidated" types are the same
  cards placed differently) to keys written str((job_type, scale_factor)), e.g.
  "('ResNet-18 (batch size 64)', 1)", each an object whose "null" member is the throughput of the
  job running alone on the GPU (the other members are co-located pairs).
- A throughput is steps per second: scheduler/scripts/profiling/measure_throughput.py divides
  the steps a job reports by the seconds they took, and a step is one optimizer step on one
  minibatch of the batch size in the job type (GavelIterator counts one step per batch the data
  loader yields; the clock runs from the first batch, so process start-up is not in it).
- scale_factor 1 is one GPU; larger ones are the summed throughputs of data-parallel jobs and
  are not converted.

So the step time at a batch is 1 / throughput, one figure per (card, model, batch): a published
mean, stored as median_s with count 1 and p10/p90 null.

Usage:
  convert_gavel.py --out DIR [--commit SHA] [--source-file PATH] [--created-at ISO] FILE
Writes DIR/<card>/<model>.json for every (card, model) with at least one batch size.
Exit status: 0 written; 2 bad input or usage (nothing written).
"""

import argparse
import ast
import datetime
import json
import math
import os
import re
import sys
import tempfile

TOOL = "convert_gavel.py 1"
REPOSITORY = "stanford-futuredata/gavel"
DEFAULT_SOURCE_FILE = "scheduler/simulation_throughputs.json"
LICENCE = ("MIT License. Copyright (c) 2020 Stanford Future Data Systems. "
           "Full text: traces/profiles/LICENSE.gavel")

# Gavel worker type -> (folder under traces/profiles, device object). Specifications are the
# vendor's published figures; which board of a card Gavel used is not stated in its repository,
# so the memory size of V100 and P100 is an assumption, named in each device's note.
CARDS = {
    "v100": ("v100", {
        "name": "NVIDIA Tesla V100 (Gavel)",
        "kind": "cuda",
        "memory_bytes": 16 * 2**30,
        "sm_count": 80,
        "compute_capability": "7.0",
    }, "V100: 80 SMs, compute capability 7.0 (NVIDIA Tesla V100 GPU Architecture whitepaper, "
       "2017; CUDA C++ Programming Guide, compute capabilities table). The board is not named "
       "in Gavel's repository; 16 GiB assumes the 16 GB board of the AWS EC2 p3 instances that "
       "Gavel's artifact targets (a 32 GB board also exists)."),
    "p100": ("p100", {
        "name": "NVIDIA Tesla P100 (Gavel)",
        "kind": "cuda",
        "memory_bytes": 16 * 2**30,
        "sm_count": 56,
        "compute_capability": "6.0",
    }, "P100: 56 SMs, compute capability 6.0 (NVIDIA Tesla P100 whitepaper, 2016). The board is "
       "not named in Gavel's repository; 16 GiB is an assumption (12 GB PCIe boards exist)."),
    "k80": ("k80", {
        "name": "NVIDIA Tesla K80, one GK210 (Gavel)",
        "kind": "cuda",
        "memory_bytes": 12 * 2**30,
        "sm_count": 13,
        "compute_capability": "3.7",
    }, "K80: a board of two GK210 GPUs; a Gavel worker is one of them (one CUDA device): 13 SMs, "
       "12 GiB, compute capability 3.7 (NVIDIA Tesla K80 board specification BD-07317; CUDA C++ "
       "Programming Guide)."),
}

# Gavel job type -> hetsim model. Metadata from hetsim's zoo where the model is in it, else from
# the source's code and published figures (cited in "notes"); FLOPs null where neither has them.
MODELS = {
    "ResNet-18": {
        "name": "resnet18",
        "origin": "gavel workloads/pytorch/image_classification/cifar10 (ResNet18, CIFAR-10)",
        "params": 11173962,
        "grad_bytes": 44695848,
        "flops_per_sample": 3338655774,
        "input": "3x32x32",
        "loss": "cross_entropy",
        "optimizer": "sgd",
        "description": "ResNet-18 for CIFAR-10 (3x3 stem, no max pool), as in hetsim's zoo",
        "notes": "Gavel's ResNet-18 is the CIFAR-10 ResNet18 of kuangliu/pytorch-cifar, the same "
                 "network as hetsim's zoo model resnet18: params, grad_bytes and training FLOPs "
                 "per sample (3 x forward, a multiply-add counted as 2) are the zoo's "
                 "(`hetsim models --json`). Gavel's data loader uses 2 worker processes "
                 "(main.py), so small batches are bound by data loading, not the GPU.",
    },
    "ResNet-50": {
        "name": "resnet50",
        "origin": "gavel workloads/pytorch/image_classification/imagenet (torchvision resnet50)",
        "params": 25557032,
        "grad_bytes": 102228128,
        "flops_per_sample": 2.28e10,
        "input": "3x224x224",
        "loss": "cross_entropy",
        "optimizer": "sgd",
        "description": "ResNet-50 on ImageNet (torchvision)",
        "notes": "params: 25,557,032 for torchvision's resnet50 (torchvision model documentation, "
                 "ResNet50_Weights.IMAGENET1K_V1, num_params); grad_bytes = 4 x params (fp32). "
                 "flops_per_sample: He et al., 'Deep Residual Learning for Image Recognition', "
                 "CVPR 2016, Table 1: 3.8e9 multiply-adds forward at 224x224; x2 for hetsim's "
                 "count (a multiply-add is 2 FLOPs) and x3 for a training step (forward + "
                 "backward), as hetsim's zoo counts: 2.28e10.",
    },
    "Transformer": {
        "name": "transformer",
        "origin": "gavel workloads/pytorch/translation (Transformer, Multi30k)",
        "params": 65000000,
        "grad_bytes": 260000000,
        "flops_per_sample": None,
        "input": "Multi30k sentence pairs (batch size in sentences)",
        "loss": "cross_entropy",
        "optimizer": "adam",
        "description": "Transformer base shape (6+6 layers, d_model 512, d_ff 2048, 8 heads)",
        "notes": "Gavel's train.py defaults are the base shape of Vaswani et al. 2017 (d_model "
                 "512, d_inner 2048, 6 layers, 8 heads). params: 65e6, the base model's count in "
                 "Vaswani et al., 'Attention Is All You Need', NeurIPS 2017, Table 3 (WMT "
                 "vocabulary); Gavel trains on Multi30k with its own, smaller vocabulary, so the "
                 "true count and gradient are smaller: an approximation, not a measurement. "
                 "grad_bytes = 4 x params. FLOPs per sample depend on sentence length and are "
                 "not given by the source: null.",
    },
    "LM": {
        "name": "lstm-lm",
        "origin": "gavel workloads/pytorch/language_modeling (2-layer LSTM, WikiText-2)",
        "params": 13987678,
        "grad_bytes": 55950712,
        "flops_per_sample": None,
        "input": "35 tokens (bptt) per sample",
        "loss": "cross_entropy",
        "optimizer": "sgd",
        "description": "word-level LSTM language model on WikiText-2",
        "notes": "Architecture from Gavel's main.py defaults (LSTM, emsize 200, nhid 200, "
                 "nlayers 2, untied; a sample is one sequence of bptt = 35 tokens) and "
                 "WikiText-2's vocabulary of 33,278 (Merity et al., 'Pointer Sentinel Mixture "
                 "Models', 2016, Table 1): embedding 33,278x200 = 6,655,600; LSTM 2 x (4x200x"
                 "(200+200) + 2x4x200) = 643,200; decoder 200x33,278 + 33,278 = 6,688,878; "
                 "total 13,987,678. grad_bytes = 4 x params. FLOPs: null (not given by the "
                 "source).",
    },
}

# Job types of the source that are not converted, and why.
SKIPPED = {
    "Recommendation": "its parameter count depends on the preprocessed ML-20M item set, which "
                      "the repository does not give",
    "A3C": "asynchronous reinforcement learning with 4 worker processes: no batch size",
    "CycleGAN": "no batch size in the job type",
}

JOB_RE = re.compile(r"^(?P<model>.+?) \(batch size (?P<batch>[0-9]+)\)$")


class InputError(Exception):
    pass


def path_of(card, key, member=None):
    p = "$.%s[%s]" % (card, json.dumps(key))
    return p + "." + member if member else p


def load(fname):
    try:
        with open(fname, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError("%s: cannot read: %s" % (fname, e.strerror))
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError("%s:%d:%d: not JSON: %s" % (fname, e.lineno, e.colno, e.msg))


def parse(fname, doc):
    """Returns {card: {model: {batch: (throughput, key)}}}, the job types skipped and the
    single-GPU runs that failed (throughput 0)."""
    if not isinstance(doc, dict):
        raise InputError("%s: $: expected an object of worker types, got %s"
                         % (fname, type(doc).__name__))
    out, skipped, failed = {}, set(), []
    for card, jobs in doc.items():
        if not isinstance(jobs, dict):
            raise InputError("%s: $.%s: expected an object of job types, got %s"
                             % (fname, card, type(jobs).__name__))
        if card not in CARDS:
            continue    # "*_unconsolidated": the same cards, placed differently
        for key, val in jobs.items():
            try:
                tup = ast.literal_eval(key)
            except (ValueError, SyntaxError):
                tup = None
            if (not isinstance(tup, tuple) or len(tup) != 2 or not isinstance(tup[0], str)
                    or not isinstance(tup[1], int) or isinstance(tup[1], bool) or tup[1] < 1):
                raise InputError("%s: %s: expected a key like \"('ResNet-18 (batch size 64)', 1)\""
                                 % (fname, path_of(card, key)))
            job, scale = tup
            if not isinstance(val, dict) or "null" not in val:
                raise InputError("%s: %s: expected an object with the isolated throughput "
                                 "\"null\"" % (fname, path_of(card, key)))
            thr = val["null"]
            if (isinstance(thr, bool) or not isinstance(thr, (int, float))
                    or not math.isfinite(thr) or thr < 0):
                raise InputError("%s: %s: expected a number of steps per second >= 0, "
                                 "got %s" % (fname, path_of(card, key, "null"), json.dumps(thr)))
            if scale != 1:
                continue    # data-parallel jobs over several GPUs: summed throughputs
            if thr == 0:
                failed.append("%s %s" % (card, job))
                continue    # Gavel's profiler stores 0 for a job that failed
            m = JOB_RE.match(job)
            name = m.group("model") if m else job
            if name not in MODELS:
                skipped.add(name)
                continue
            batch = int(m.group("batch"))
            if batch < 1:
                raise InputError("%s: %s: batch size must be positive"
                                 % (fname, path_of(card, key)))
            out.setdefault(card, {}).setdefault(name, {})[batch] = (thr, key)
    return out, skipped, failed


def profile(card, model, batches, args, command):
    folder, device, device_note = CARDS[card]
    meta = MODELS[model]
    compute = []
    extra_entries = []
    for batch in sorted(batches):
        thr, key = batches[batch]
        compute.append({"batch": batch, "phase": "step", "median_s": 1.0 / thr,
                        "p10_s": None, "p90_s": None, "count": 1,
                        "peak_memory_bytes": None})
        extra_entries.append({"batch": batch, "key": key, "steps_per_s": thr})
    notes = ("Gavel's isolated throughput (member \"null\" of key \"('<job type>', 1)\" under "
             "worker type \"%s\") in steps per second, a step being one optimizer step on one "
             "minibatch; converted as median_s = 1 / throughput. Each figure is a published "
             "mean over a measurement window of Gavel's profiler, not a median: count 1, "
             "p10/p90 null. Wall time per step as the job saw it: data loading included. "
             "Device: %s Model: %s"
             % (card, device_note, meta["notes"]))
    model_obj = {k: meta[k] for k in ("name", "origin", "params", "grad_bytes",
                                      "flops_per_sample", "input", "loss", "description")}
    return folder, meta["name"], {
        "format": "hetsim-profile",
        "version": 1,
        "created_at": args.created_at,
        "tool": TOOL,
        "source": {
            "repository": REPOSITORY,
            "commit": args.commit,
            "file": args.source_file,
            "licence": LICENCE,
            "notes": notes,
            "command": command,
        },
        "device": dict(device),
        "model": model_obj,
        "execution": {"mode": "plain", "world_size": 1, "concurrent": 1,
                      "dtype": "float32", "optimizer": meta["optimizer"]},
        "compute": compute,
        "oom_batch": None,
        "extra": {"gavel_worker_type": card, "gavel_job_type": model,
                  "throughputs": extra_entries},
    }


def dump(doc):
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_all(outdir, docs):
    """Writes every file through a temporary name and a rename, after all were built."""
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


def main(argv):
    ap = argparse.ArgumentParser(
        prog="convert_gavel.py",
        description="Convert Gavel's throughputs JSON into hetsim profiles (format v1).")
    ap.add_argument("file", help="Gavel's throughputs JSON (scheduler/simulation_throughputs.json)")
    ap.add_argument("--out", required=True, help="output folder (profiles go to OUT/<card>/<model>.json)")
    ap.add_argument("--commit", default="unknown", help="Gavel commit the file was taken from")
    ap.add_argument("--source-file", default=DEFAULT_SOURCE_FILE,
                    help="path of the file inside Gavel's repository (default %(default)s)")
    ap.add_argument("--created-at", default=None,
                    help="ISO-8601 UTC time written as created_at (default: now)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if args.created_at is None:
        args.created_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    elif not re.match(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", args.created_at):
        print("convert_gavel.py: --created-at: expected YYYY-MM-DDTHH:MM:SSZ, got %r"
              % args.created_at, file=sys.stderr)
        return 2
    if not re.match(r"^([0-9a-f]{40}|unknown)$", args.commit):
        print("convert_gavel.py: --commit: expected 40 hex digits, got %r" % args.commit,
              file=sys.stderr)
        return 2
    command = ("/usr/bin/python3 tools/convert_gavel.py --out traces/profiles --commit %s "
               "--source-file %s --created-at %s <%s at commit %s>"
               % (args.commit, args.source_file, args.created_at, args.source_file, args.commit))
    try:
        data, skipped, failed = parse(args.file, load(args.file))
    except InputError as e:
        print("convert_gavel.py: %s" % e, file=sys.stderr)
        return 2
    if not data:
        print("convert_gavel.py: %s: no single-GPU throughput of a converted model (%s) "
              "for a worker type of %s" % (args.file, ", ".join(sorted(MODELS)),
                                             ", ".join(sorted(CARDS))), file=sys.stderr)
        return 2
    docs = {}
    for card in data:
        for model, batches in data[card].items():
            folder, name, doc = profile(card, model, batches, args, command)
            docs[(folder, name)] = doc
    write_all(args.out, docs)
    for (folder, name) in sorted(docs):
        print("wrote %s" % os.path.join(args.out, folder, name + ".json"))
    for what in failed:
        print("skipped %s: throughput 0 (a failed run in Gavel's profiler)" % what,
              file=sys.stderr)
    for name in sorted(skipped):
        print("skipped job type %r: %s" % (name, SKIPPED.get(name, "not a converted model")),
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
