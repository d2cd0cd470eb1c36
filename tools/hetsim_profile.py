#!/usr/bin/env python3
"""hetsim_profile.py: time real PyTorch training steps of a model on a device and write a hetsim
profile (format "hetsim-profile" version 1, docs/profile.md) for `hetsim calib import`.

    python3 tools/hetsim_profile.py --model torchvision:resnet18 --device cuda:0 \\
        --batches 16,32,64,128,256 --out v100-resnet18.json
    python3 tools/hetsim_profile.py --model mypkg.models:build_net --input 3x224x224 ...
    python3 tools/hetsim_profile.py --model cnn --device cpu --batches 32,64,128 --ddp \\
        --concurrent 2 --comm --out cpu-cnn-ddp2.json

Depends on PyTorch alone (1.13, Debian 12's python3-torch, or 2.x); torchvision only for
`torchvision:NAME` models. Exit status: 0 written, 1 runtime failure (nothing written),
2 bad arguments (nothing written).

Method (docs/profile.md says it in full):
- One training step = optimizer.zero_grad, forward and loss ("forward"), loss.backward()
  ("backward"), optimizer.step() ("update"); "step" is the three timed together, from the mark
  before forward to the mark after the update. Marks are CUDA events on a GPU (read after the
  step's last event completes) and time.perf_counter() on the CPU.
- Inputs are random fp32 tensors (or random token ids with --tokens) and random targets, made
  once per batch size on the device; timing does not depend on the values.
- Batch sizes run in increasing order. Per batch: --warmup untimed steps, then timed steps until
  the distribution-free 95% confidence interval of the median step time lies within --rel-tol of
  the median (from 6 steps, and at least --min-reps), or --max-reps steps, or the --budget of
  seconds per batch is spent (with at least 3 timed steps, or --max-reps if fewer).
- With --rounds R, every batch size is timed R times, the rounds alternately in increasing and
  decreasing order; an entry pools the samples of every round and every --concurrent process.
- The first batch size that runs out of memory ends the sweep; it is written as oom_batch, and
  later rounds time only the sizes below it.
"""
import argparse
import contextlib
import copy
import csv
import ctypes
import datetime
import gzip
import importlib
import json
import math
import os
import platform
import socket
import struct
import sys
import tempfile
import time

TOOL = "hetsim_profile.py 1"
FORMAT = "hetsim-profile"
VERSION = 1
PHASES = ("forward", "backward", "update", "step")
BUILTINS = ("mlp", "cnn", "resnet18", "vgg16", "mobilenetv2")
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_MEAN, FASHION_MNIST_STD = 0.2860, 0.3530  # as nn/nn_data.h normalises
MIN_BUDGET_STEPS = 3  # timed steps a spent --budget still waits for


class UsageError(Exception):
    """Bad arguments: exit status 2, nothing written."""


class RunError(Exception):
    """A failure while running: exit status 1, nothing written."""


def log(args, msg):
    if not getattr(args, "quiet", False):
        print("hetsim_profile: " + msg, file=sys.stderr, flush=True)


# --- argument parsing -------------------------------------------------------------------------

_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3,
               "gb": 1000**3, "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def parse_bytes(text, what):
    s = text.strip().lower()
    i = len(s)
    while i > 0 and s[i - 1].isalpha():
        i -= 1
    num, unit = s[:i], s[i:]
    try:
        v = float(num)
    except ValueError:
        raise UsageError(f"{what}: expected a size like 4096, 4KiB or 64MiB, got \"{text}\"")
    if unit not in _SIZE_UNITS or not math.isfinite(v) or v < 0:
        raise UsageError(f"{what}: expected a size like 4096, 4KiB or 64MiB, got \"{text}\"")
    return int(round(v * _SIZE_UNITS[unit]))


def parse_int_list(text, what, minimum=1, repeats=False):
    out = []
    for part in text.split(","):
        p = part.strip()
        if not p.isdigit() or int(p) < minimum:
            raise UsageError(f"{what}: expected a comma-separated list of integers >= {minimum}, "
                             f"got \"{text}\"")
        v = int(p)
        if v in out and not repeats:
            raise UsageError(f"{what}: {v} is listed twice in \"{text}\"")
        out.append(v)
    return out


def parse_dims(text, what):
    parts = text.lower().split("x")
    if not parts or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"{what}: expected dimensions like 3x224x224 or 784, got \"{text}\"")
    return tuple(int(p) for p in parts)


def parse_device(text):
    import torch
    s = text.strip()
    if s == "cpu":
        return torch.device("cpu")
    if s == "cuda" or (s.startswith("cuda:") and s[5:].isdigit()):
        idx = int(s[5:]) if s.startswith("cuda:") else 0
        if not torch.cuda.is_available():
            raise UsageError(f"--device {s}: no usable CUDA device (torch {torch.__version__} "
                             f"built {'with CUDA ' + str(torch.version.cuda) if torch.version.cuda else 'without CUDA'})")
        n = torch.cuda.device_count()
        if idx >= n:
            raise UsageError(f"--device {s}: this machine has {n} GPU{'s' if n != 1 else ''}")
        return torch.device("cuda", idx)
    raise UsageError(f"--device: expected cpu, cuda or cuda:I, got \"{text}\"")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage and exits 2 itself; keep its message short
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def _positive(kind):
    def conv(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got \"{text}\"")
        if not (v > 0) or (kind is float and not math.isfinite(v)):
            raise argparse.ArgumentTypeError(f"expected a positive number, got \"{text}\"")
        return v
    return conv


def _nonneg_int(text):
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got \"{text}\"")
    return int(text)


def build_parser():
    p = _Parser(prog="hetsim_profile.py",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description=__doc__.split("\n\n")[0].replace("\n", " "),
                epilog="Models: mlp, cnn, resnet18, vgg16, mobilenetv2 (built in, layer for layer "
                "as hetsim's zoo: `hetsim models`), torchvision:NAME (random weights, nothing "
                "downloaded), or module.path:factory (a callable returning an nn.Module, imported "
                "with the current folder on sys.path; needs --input).\n\n"
                "Time per batch size: --warmup steps, then timed steps until the median's 95%% "
                "confidence interval lies within --rel-tol (and at least --min-reps steps), or "
                "--max-reps steps, or --budget seconds of timed steps per batch size (default "
                "10 s; at least 3 steps are timed however long they take).\n\n"
                "Exit status: 0 written; 1 runtime failure; 2 bad arguments. Format and method: "
                "docs/profile.md.")
    g = p.add_argument_group("model")
    g.add_argument("--model", help="mlp | cnn | resnet18 | vgg16 | mobilenetv2 | torchvision:NAME "
                   "| module.path:factory")
    g.add_argument("--name", help="model name in the profile, the name `hetsim --model` takes "
                   "(default: the built-in's, torchvision's or the factory's name)")
    g.add_argument("--input", help="input dimensions per sample, CxHxW or any AxBx... (default: "
                   "the zoo's for built-ins, 3x224x224 for torchvision)")
    g.add_argument("--classes", type=_positive(int), help="output classes (default: 10 built-in, "
                   "1000 torchvision, else read from the model's output)")
    g.add_argument("--tokens", type=_positive(int), metavar="VOCAB",
                   help="inputs are int64 token ids in [0, VOCAB) instead of fp32 values")
    g.add_argument("--loss", choices=("cross_entropy", "mse"), default="cross_entropy",
                   help="cross_entropy (class dim 1, PyTorch's convention; default) or mse "
                   "against random targets of the output's shape")
    g.add_argument("--describe", action="store_true", help="print the model's name, parameters, "
                   "gradient bytes and FLOPs as JSON on stdout and exit (no timing)")
    g = p.add_argument_group("timing")
    g.add_argument("--device", default="cpu", help="cpu, cuda or cuda:I (default cpu)")
    g.add_argument("--device-name", help="device name in the profile, the name `compute: {calib: "
                   "NAME}` takes (default: the CPU model name from /proc/cpuinfo, or the GPU's)")
    g.add_argument("--batches", default="8,16,32,64,128,256",
                   help="batch sizes (default 8,16,32,64,128,256; timed in increasing order, "
                   "alternately decreasing with --rounds)")
    g.add_argument("--out", help="the profile to write (JSON; written whole at the end)")
    g.add_argument("--warmup", type=_nonneg_int, default=3, help="untimed steps per batch (3)")
    g.add_argument("--min-reps", type=_positive(int), default=5, help="timed steps at least (5)")
    g.add_argument("--max-reps", type=_positive(int), default=50, help="timed steps at most (50)")
    g.add_argument("--rel-tol", type=_positive(float), default=0.02,
                   help="the median's 95%% confidence interval within ±this (0.02)")
    g.add_argument("--budget", type=_positive(float), default=10.0, metavar="SECONDS",
                   help="seconds of timed steps per batch size (10; at least 3 steps)")
    g.add_argument("--math", choices=("default", "strict"), default="default",
                   help="default: PyTorch's own settings (TF32 allowed for convolutions, cuDNN's "
                   "choice of algorithm); strict: TF32 off and deterministic cuDNN algorithms, as "
                   "hetsim's calibration computes by default (HETSIM_CUDA_MATH=strict)")
    g.add_argument("--threads", type=_positive(int), help="torch.set_num_threads per process "
                   "(default 1 on the cpu, as hetsim's cpu workers; torch's default on a GPU)")
    g.add_argument("--clock", choices=("wall", "process"), default="wall",
                   help="cpu: wall time (perf_counter, default) or the process's CPU time over "
                   "all its threads (process_time: blind to other load on a busy machine, and "
                   "to waiting); a GPU is timed by CUDA events")
    g.add_argument("--lr", type=_positive(float), default=0.01, help="SGD learning rate (0.01)")
    g.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (0.9, as hetsim)")
    g.add_argument("--weight-decay", type=float, default=0.0, help="SGD weight decay (0)")
    g.add_argument("--seed", type=int, default=1, help="seed of weights and inputs (1)")
    g.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    g = p.add_argument_group("how the run will execute")
    g.add_argument("--ddp", action="store_true", help="time the step wrapped in "
                   "DistributedDataParallel at world size 1 (gloo on cpu, nccl on cuda): "
                   "execution.mode \"ddp\"")
    g.add_argument("--concurrent", type=_positive(int), default=1, metavar="N",
                   help="N processes step at once, in lock-step, on the host (and GPU); samples "
                   "pooled over them: execution.concurrent N (default 1)")
    g.add_argument("--pin", choices=("auto", "none"), default="auto",
                   help="cpu: pin process i to its own --threads CPUs when there are enough "
                   "(auto, default) or leave them to the scheduler (none)")
    g.add_argument("--process-per-batch", choices=("auto", "on", "off"), default="auto",
                   help="time each batch size in fresh processes (auto: on for the cpu, off on a "
                   "GPU). On the cpu a process that stepped smaller batches first was measured "
                   "up to 1.6x slower at a larger one than a fresh process (cnn at 256 after 128 "
                   "and 192: 39-43 ms against 26.6; docs/profile.md), while a training run steps "
                   "one batch size from its start")
    g.add_argument("--rounds", default="1", metavar="R",
                   help="time every batch size R times (default 1), round 1 in increasing order, "
                   "round 2 decreasing, and so on, so that a drift of the machine reaches small "
                   "and large batches alike; each round in fresh processes with "
                   "--process-per-batch, else R sweeps in the same processes. Each entry pools "
                   "the samples of every round and process (compute[].processes, "
                   "process_medians_s); R times the timing")
    g = p.add_argument_group("communication")
    g.add_argument("--comm", action="store_true", help="also time all-reduce and send/recv "
                   "against message size through torch.distributed, over --comm-world local "
                   "processes (implied under torchrun, over its ranks)")
    g.add_argument("--comm-world", type=_positive(int), default=2, metavar="W",
                   help="processes for --comm outside torchrun (2)")
    g.add_argument("--comm-backend", choices=("gloo", "nccl"),
                   help="default: nccl on cuda, gloo on cpu")
    g.add_argument("--comm-max", default="64MiB", help="largest message (64MiB); sizes are 4 B "
                   "and 4 KiB x 4^k up to it, and the model's gradient")
    g.add_argument("--comm-sizes", help="message sizes instead (e.g. 4,4KiB,1MiB)")
    g.add_argument("--comm-budget", type=_positive(float), default=1.0, metavar="SECONDS",
                   help="seconds of timed operations per size and op (1; 5 to --max-reps ops)")
    g.add_argument("--comm-step", type=_positive(int), metavar="BATCH",
                   help="also time the gradient's all-reduce as DDP issues it: the --comm "
                   "processes train the model in DistributedDataParallel at BATCH samples each "
                   "for --comm-budget seconds (at least 20 steps) and time, per step, the last "
                   "bucket ready to the end of the backward on the rank that arrived last: "
                   "comm entry op \"allreduce_step\" with its mean (docs/profile.md)")
    g = p.add_argument_group("convergence curves (hetsim fit-convergence)")
    g.add_argument("--curves", metavar="FILE.csv", help="also train the model for real and write "
                   "its evaluation curve: columns samples,epoch,loss,accuracy,batch,workers,policy "
                   "(and period with --curve-periods, seed with --curve-seeds)")
    g.add_argument("--curve-data", default="synthetic", help="synthetic (default: a random "
                   "teacher with noisy labels, fresh samples), fashion-mnist[:DIR], or FILE.pt holding "
                   "{'x','y'[,'x_test','y_test']}")
    g.add_argument("--curve-batch", type=_positive(int), default=64, help="batch (64)")
    g.add_argument("--curve-epochs", type=_positive(float), default=3.0, help="epochs (3)")
    g.add_argument("--curve-evals", type=_positive(int), default=20,
                   help="evaluations after the one at 0 samples (20)")
    g.add_argument("--curve-lr", type=_positive(float), default=0.01, help="SGD lr (0.01)")
    g.add_argument("--curve-seeds", type=_positive(int), default=1, metavar="N",
                   help="train N times, seeds --seed to --seed + N - 1 (weights and sample order), "
                   "and add a seed column: a fit to several seeds' curves is not one seed's (1)")
    g.add_argument("--curve-periods", default="1", metavar="T[,T...]",
                   help="train once per period T: 1 is plain SGD in one process; T > 1 is local "
                   "SGD of --curve-workers replicas, each stepping on its share of --curve-batch, "
                   "their parameters averaged after every T steps (rows policy localsgd, a period "
                   "column): with 1 among them `hetsim fit-convergence` fits lambda_tau (1)")
    g.add_argument("--curve-workers", type=_positive(int), default=2, metavar="N",
                   help="replicas of a local-SGD curve (2; --curve-batch must divide by N)")
    g.add_argument("--curve-train-samples", type=_positive(int), default=10000,
                   help="synthetic: samples in a nominal epoch (10000; drawn fresh)")
    g.add_argument("--curve-eval-samples", type=_positive(int), default=2000,
                   help="evaluation samples (2000; synthetic: generated, else the first of the "
                   "test set)")
    return p


def check_args(a):
    """Everything that can be checked before timing; raises UsageError."""
    if not a.model:
        raise UsageError("--model is required")
    if not a.describe and not a.out:
        raise UsageError("--out FILE is required (or --describe)")
    a.batch_list = sorted(parse_int_list(a.batches, "--batches"))
    r = str(a.rounds).strip()
    if not r.isdigit() or int(r) < 1:
        raise UsageError(f"--rounds: expected an integer >= 1, got \"{a.rounds}\"")
    a.rounds = int(r)
    a.input_dims = parse_dims(a.input, "--input") if a.input else None
    if a.min_reps > a.max_reps:
        raise UsageError(f"--min-reps {a.min_reps} is above --max-reps {a.max_reps}")
    if not (0 <= a.momentum < 1) or not math.isfinite(a.momentum):
        raise UsageError(f"--momentum: expected a number in [0, 1), got {a.momentum}")
    if a.weight_decay < 0 or not math.isfinite(a.weight_decay):
        raise UsageError(f"--weight-decay: expected a number >= 0, got {a.weight_decay}")
    for path, what in ((a.out, "--out"), (a.curves, "--curves")):
        if path:
            d = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(d):
                raise UsageError(f"{what} {path}: folder {d} does not exist")
            if not os.access(d, os.W_OK):
                raise UsageError(f"{what} {path}: folder {d} is not writable")
            if os.path.isdir(path):
                raise UsageError(f"{what} {path}: is a folder")
    if a.out and a.curves and os.path.abspath(a.out) == os.path.abspath(a.curves):
        raise UsageError("--out and --curves name the same file")
    a.comm_size_list = None
    if a.comm_sizes:
        a.comm_size_list = sorted({parse_bytes(s, "--comm-sizes") for s in a.comm_sizes.split(",")})
    a.comm_max_bytes = parse_bytes(a.comm_max, "--comm-max")
    if a.clock == "process" and a.device != "cpu":
        raise UsageError("--clock process: only on --device cpu (a GPU is timed by CUDA events)")
    if a.comm_max_bytes < 4:
        raise UsageError(f"--comm-max: at least 4 bytes, got \"{a.comm_max}\"")
    if a.comm_world < 2:
        raise UsageError(f"--comm-world: at least 2 processes, got {a.comm_world}")
    if a.curves:
        cd = a.curve_data
        if cd.startswith("fashion-mnist"):
            folder = cd.split(":", 1)[1] if ":" in cd else FASHION_MNIST_DIR
            if not os.path.exists(os.path.join(folder, "train-images-idx3-ubyte.gz")):
                raise UsageError(f"--curve-data {cd}: no train-images-idx3-ubyte.gz in {folder} "
                                 "(Debian: apt-get install dataset-fashion-mnist)")
        elif cd != "synthetic" and not os.path.isfile(cd):
            raise UsageError(f"--curve-data: expected synthetic, fashion-mnist[:DIR] or a .pt "
                             f"file, got \"{cd}\" (no such file)")
        if cd == "synthetic" and a.tokens:
            raise UsageError("--curve-data synthetic needs fp32 inputs; with --tokens give a "
                             ".pt file of token ids")
    a.curve_period_list = parse_int_list(a.curve_periods, "--curve-periods")
    if any(t > 1 for t in a.curve_period_list):
        if a.curve_workers < 2:
            raise UsageError(f"--curve-workers {a.curve_workers}: local SGD (--curve-periods above 1) "
                             "averages at least 2 replicas")
        if a.curve_batch % a.curve_workers:
            raise UsageError(f"--curve-batch {a.curve_batch}: local SGD splits it evenly over "
                             f"--curve-workers {a.curve_workers}")


def torchrun_env():
    """(rank, world_size, local_rank) when started by torchrun (or a launcher setting the same
    variables), else None."""
    e = os.environ
    if all(k in e for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        try:
            return int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", e["RANK"]))
        except ValueError:
            raise UsageError(f"RANK/WORLD_SIZE/LOCAL_RANK: expected integers, got "
                             f"{e['RANK']!r}/{e['WORLD_SIZE']!r}/{e.get('LOCAL_RANK')!r}")
    return None


# --- models -----------------------------------------------------------------------------------

def _zoo_classes():
    """The built-in models, layer for layer as nn/nn_zoo.c builds them (parameter counts are
    checked against `hetsim models` by tests/cli_profile.sh)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class MLP(nn.Module):  # 784-256-10 with ReLU
        def __init__(self, in_features=784, classes=10):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(in_features, 256), nn.Linear(256, classes)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x.flatten(1))))

    class CNN(nn.Module):  # LeNet-5 with ReLU and max pooling; padding 2 keeps 28x28
        def __init__(self, in_c=1, classes=10):
            super().__init__()
            self.conv1 = nn.Conv2d(in_c, 6, 5, 1, 2)
            self.conv2 = nn.Conv2d(6, 16, 5, 1, 0)
            self.fc1, self.fc2, self.fc3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, classes)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2).flatten(1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    def conv_bn(in_c, out_c, k, stride, pad, groups=1, bias=False):
        return nn.Sequential(nn.Conv2d(in_c, out_c, k, stride, pad, groups=groups, bias=bias),
                             nn.BatchNorm2d(out_c))

    class BasicBlock(nn.Module):
        def __init__(self, in_c, planes, stride):
            super().__init__()
            self.a, self.b = conv_bn(in_c, planes, 3, stride, 1), conv_bn(planes, planes, 3, 1, 1)
            self.short = conv_bn(in_c, planes, 1, stride, 0) if stride != 1 or in_c != planes else None

        def forward(self, x):
            y = self.b(F.relu(self.a(x)))
            return F.relu(y + (self.short(x) if self.short is not None else x))

    class ResNet18(nn.Module):  # CIFAR: 3x3 stem, no max pool, BasicBlocks [2,2,2,2]
        def __init__(self, in_c=3, classes=10):
            super().__init__()
            self.stem = conv_bn(in_c, 64, 3, 1, 1)
            blocks, c = [], 64
            for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                for s in (stride, 1):
                    blocks.append(BasicBlock(c, planes, s))
                    c = planes
            self.blocks, self.fc = nn.Sequential(*blocks), nn.Linear(512, classes)

        def forward(self, x):
            x = self.blocks(F.relu(self.stem(x)))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    class VGG16(nn.Module):  # with BatchNorm, conv bias kept (14,728,266 parameters)
        def __init__(self, in_c=3, classes=10):
            super().__init__()
            layers, c = [], in_c
            for v in (64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0):
                if v == 0:
                    layers.append(nn.MaxPool2d(2, 2))
                else:
                    layers += [nn.Conv2d(c, v, 3, 1, 1), nn.BatchNorm2d(v), nn.ReLU()]
                    c = v
            self.features, self.fc = nn.Sequential(*layers), nn.Linear(512, classes)

        def forward(self, x):
            return self.fc(self.features(x).flatten(1))

    class InvertedResidual(nn.Module):  # expand, depthwise, linear projection
        def __init__(self, in_c, out_c, expansion, stride):
            super().__init__()
            planes = expansion * in_c
            self.stride = stride
            self.expand = conv_bn(in_c, planes, 1, 1, 0)
            self.dw = conv_bn(planes, planes, 3, stride, 1, groups=planes)
            self.project = conv_bn(planes, out_c, 1, 1, 0)
            self.short = conv_bn(in_c, out_c, 1, 1, 0) if stride == 1 and in_c != out_c else None

        def forward(self, x):
            y = self.project(F.relu(self.dw(F.relu(self.expand(x)))))
            if self.stride != 1:
                return y
            return y + (self.short(x) if self.short is not None else x)

    class MobileNetV2(nn.Module):  # CIFAR: stride-1 stem and second row, ReLU, width 1.0
        def __init__(self, in_c=3, classes=10):
            super().__init__()
            cfg = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                   (6, 160, 3, 2), (6, 320, 1, 1))
            self.stem = conv_bn(in_c, 32, 3, 1, 1)
            blocks, c = [], 32
            for expansion, out_c, n, stride in cfg:
                for i in range(n):
                    blocks.append(InvertedResidual(c, out_c, expansion, stride if i == 0 else 1))
                    c = out_c
            self.blocks, self.head = nn.Sequential(*blocks), conv_bn(320, 1280, 1, 1, 0)
            self.fc = nn.Linear(1280, classes)

        def forward(self, x):
            x = F.relu(self.head(self.blocks(F.relu(self.stem(x)))))
            return self.fc(F.avg_pool2d(x, 4).flatten(1))

    return {"mlp": MLP, "cnn": CNN, "resnet18": ResNet18, "vgg16": VGG16, "mobilenetv2": MobileNetV2}


_ZOO_INPUT = {"mlp": (1, 28, 28), "cnn": (1, 28, 28), "resnet18": (3, 32, 32),
              "vgg16": (3, 32, 32), "mobilenetv2": (3, 32, 32)}


class ModelSpec:
    """What --model, --input, --classes and --tokens resolve to; build() makes a fresh module."""

    def __init__(self, spec, input_dims, classes, tokens, name):
        self.spec, self.tokens = spec, tokens
        if spec in BUILTINS:
            self.kind, self.name_default = "builtin", spec
            zoo_in = _ZOO_INPUT[spec]
            self.input = input_dims or zoo_in
            if spec == "mlp":
                if len(self.input) == 0:
                    raise UsageError("--input: mlp needs at least one dimension")
            elif len(self.input) != 3:
                raise UsageError(f"--input: {spec} takes CxHxW, got {'x'.join(map(str, self.input))}")
            if spec == "cnn" and self.input[1:] != (28, 28):
                raise UsageError(f"--input: cnn is built for HxW 28x28 (its first linear layer "
                                 f"takes 16x5x5), got {'x'.join(map(str, self.input))}")
            if spec == "mobilenetv2" and (self.input[1] < 32 or self.input[2] < 32):
                raise UsageError("--input: mobilenetv2 needs HxW of at least 32x32")
            if spec == "vgg16" and self.input[1:] != (32, 32):
                raise UsageError("--input: vgg16 (one 512-wide linear layer) takes HxW 32x32")
            self.classes = classes or 10
            if tokens:
                raise UsageError(f"--tokens: the built-in {spec} takes fp32 inputs")
        elif spec.startswith("torchvision:"):
            self.kind, self.name_default = "torchvision", spec.split(":", 1)[1]
            if not self.name_default:
                raise UsageError("--model torchvision:NAME: NAME is empty")
            try:
                import torchvision.models as tvm
            except ImportError as e:
                raise UsageError(f"--model {spec}: cannot import torchvision ({e}; Debian: "
                                 "apt-get install python3-torchvision)")
            except Exception as e:  # built for another torch: RuntimeError on import
                raise UsageError(f"--model {spec}: torchvision does not load with this torch ({e})")
            fn = tvm
            for part in self.name_default.split("."):
                fn = getattr(fn, part, None)
                if fn is None:
                    break
            if fn is None or not callable(fn) or isinstance(fn, type(tvm)):
                names = sorted(n for n in dir(tvm) if not n.startswith("_") and n[0].islower()
                               and callable(getattr(tvm, n)) and n not in ("get_model", "list_models",
                                                                             "get_weight", "get_model_weights",
                                                                             "get_model_builder"))
                raise UsageError(f"--model {spec}: torchvision.models has no model \"{self.name_default}\" "
                                 f"(it has: {', '.join(names[:40])}{', ...' if len(names) > 40 else ''})")
            self.factory = fn
            self.input = input_dims or (3, 224, 224)
            self.classes = classes or 1000
        elif ":" in spec:
            mod, _, attr = spec.partition(":")
            if not mod or not attr:
                raise UsageError(f"--model: expected module.path:factory, got \"{spec}\"")
            if not input_dims:
                raise UsageError(f"--model {spec}: --input is required for a factory model")
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            try:
                m = importlib.import_module(mod)
            except Exception as e:  # the user's module: any error is a bad argument
                raise UsageError(f"--model {spec}: cannot import {mod}: {type(e).__name__}: {e}")
            fn = m
            for part in attr.split("."):
                fn = getattr(fn, part, None)
                if fn is None:
                    raise UsageError(f"--model {spec}: module {mod} has no \"{attr}\"")
            if not callable(fn):
                raise UsageError(f"--model {spec}: {attr} is not callable")
            self.kind, self.factory, self.name_default = "factory", fn, attr.split(".")[-1]
            self.input, self.classes = input_dims, classes
        else:
            raise UsageError(f"--model: unknown model \"{spec}\"; expected one of {', '.join(BUILTINS)}, "
                             "torchvision:NAME or module.path:factory")
        self.name = name or self.name_default
        if not self.name.strip():
            raise UsageError("--name: empty")

    def build(self):
        import torch.nn as nn
        if self.kind == "builtin":
            cls = _zoo_classes()[self.spec]
            if self.spec == "mlp":
                return cls(math.prod(self.input), self.classes)
            return cls(self.input[0], self.classes)
        if self.kind == "torchvision":
            try:
                m = self.factory(weights=None, num_classes=self.classes)
            except TypeError:  # torchvision < 0.13 builders take pretrained=
                m = self.factory(pretrained=False, num_classes=self.classes)
        else:
            try:
                m = self.factory()
            except Exception as e:
                raise UsageError(f"--model {self.spec}: the factory raised {type(e).__name__}: {e}")
        if not isinstance(m, nn.Module):
            raise UsageError(f"--model {self.spec}: the factory returned {type(m).__name__}, not an "
                             "nn.Module")
        return m

    def input_str(self):
        return "x".join(str(d) for d in self.input)


def logits_of(out):
    """The tensor a loss applies to: the output, the first of a tuple (Inception's aux logits),
    or 'out' of a dict (torchvision's segmentation models)."""
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        return out["out"] if "out" in out else next(iter(out.values()))
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    if hasattr(out, "logits"):
        return out.logits
    raise RunError(f"the model returned {type(out).__name__}; expected a tensor, a tuple or a dict")


def make_inputs(ms, batch, device, gen_seed):
    import torch
    g = torch.Generator().manual_seed(gen_seed)
    if ms.tokens:
        x = torch.randint(0, ms.tokens, (batch,) + tuple(ms.input), generator=g)
    else:
        x = torch.randn((batch,) + tuple(ms.input), generator=g)
    return x.to(device)


def make_targets(ms, out_shape, batch, device, loss, gen_seed):
    import torch
    g = torch.Generator().manual_seed(gen_seed + 1)
    if loss == "mse":
        return torch.randn(out_shape, generator=g).to(device)
    shape = (batch,) + tuple(out_shape[2:])
    return torch.randint(0, out_shape[1], shape, generator=g).to(device)


def loss_fn(name):
    import torch.nn.functional as F
    return F.mse_loss if name == "mse" else F.cross_entropy


def probe(ms, model, device):
    """One forward at batch 2 in eval mode: checks that the model takes the input, and gives the
    output shape (classes from dim 1)."""
    import torch
    model.eval()
    try:
        with torch.no_grad():
            out = logits_of(model(make_inputs(ms, 2, device, 0)))
    except UsageError:
        raise
    except Exception as e:
        raise UsageError(f"--model {ms.spec}: the model rejects an input of {ms.input_str()}"
                         f"{' token ids' if ms.tokens else ''}: {type(e).__name__}: {e}")
    finally:
        model.train()
    if out.dim() < 2:
        raise UsageError(f"--model {ms.spec}: output of shape {tuple(out.shape)}; expected "
                         "(batch, classes, ...)")
    return tuple(out.shape)


def count_flops(ms, model, device):
    """Training FLOPs per sample (forward + backward) and how they were counted, or (None, why).

    The forward's matrix products and convolutions (a multiply-add counted as 2), times 3 for the
    backward (input and weight gradients, the 1:2 rule hetsim's zoo uses). torch >= 2.1 counts
    the forward with torch.utils.flop_counter.FlopCounterMode (every matmul, attention's too);
    its count of a backward is not used, as it overcounts grouped convolutions' backward (torch
    2.5.1: mobilenetv2's backward 20.5x its forward, resnet18's 2.0x). torch 1.13: forward hooks
    on the nn.Linear and nn.Conv*d modules that run; matrix products outside such modules
    (attention's) are not seen."""
    import torch
    import torch.nn as nn
    b = 2
    x = make_inputs(ms, b, device, 7)
    total, method, why = None, None, None
    try:
        from torch.utils.flop_counter import FlopCounterMode
        fc = FlopCounterMode(display=False)
        with fc, torch.no_grad():
            model(x)
        total = 3.0 * float(fc.get_total_flops())
        method = "torch.utils.flop_counter over the forward x 3 (matmul, convolution, attention)"
    except Exception as e:  # torch < 2.1 has no usable counter: count by hooks instead
        why = f"{type(e).__name__}: {e}"
    if total is None:
        fwd = [0.0]

        def hook(mod, inp, out):
            o = out if isinstance(out, torch.Tensor) else out[0]
            if isinstance(mod, nn.Linear):
                fwd[0] += 2.0 * o.numel() * mod.in_features
            elif isinstance(mod, nn.modules.conv._ConvTransposeNd):
                # each input element meets Cout/groups x kernel weights
                fwd[0] += 2.0 * inp[0].numel() * (mod.out_channels // mod.groups) * math.prod(mod.kernel_size)
            else:  # nn.Conv1d/2d/3d: per output element Cin/groups x kernel
                fwd[0] += 2.0 * o.numel() * (mod.in_channels // mod.groups) * math.prod(mod.kernel_size)

        hs = [m.register_forward_hook(hook) for m in model.modules()
              if isinstance(m, (nn.Linear, nn.modules.conv._ConvNd))]
        try:
            with torch.no_grad():
                model(x)
        except Exception as e:
            return None, f"not measured: {type(e).__name__}: {e}"
        finally:
            for h in hs:
                h.remove()
        total = 3.0 * fwd[0]
        method = ("forward hooks on nn.Linear/nn.Conv modules x 3 (torch.utils.flop_counter "
                  f"unavailable: {why})")
    if not total > 0:
        return None, "not measured: no matrix product or convolution seen"
    return total / b, method


def model_facts(ms, model):
    params = [p for p in model.parameters() if p.requires_grad]
    n = sum(p.numel() for p in params)
    grad_bytes = sum(p.numel() * p.element_size() for p in params)
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
    return n, grad_bytes, dtypes


# --- statistics -------------------------------------------------------------------------------

def quantile(sorted_x, q):
    """Linear interpolation between order statistics (numpy's default)."""
    n = len(sorted_x)
    if n == 1:
        return sorted_x[0]
    h = (n - 1) * q
    lo = int(math.floor(h))
    hi = min(lo + 1, n - 1)
    return sorted_x[lo] + (h - lo) * (sorted_x[hi] - sorted_x[lo])


def median_ci_ok(xs, rel_tol):
    """True when the distribution-free 95% confidence interval of the median, the order
    statistics x(j) and x(n+1-j) with j the largest rank such that P(Binomial(n, 1/2) < j) <=
    2.5% (it exists from n = 6), lies within ±rel_tol of the median (as calib/cal_time.c)."""
    n = len(xs)
    if n < 6:
        return False
    s = sorted(xs)
    cum, j = 0.0, 0
    for k in range(n + 1):
        cum += math.comb(n, k) / 2.0**n  # P(X <= k)
        if cum > 0.025:
            break
        j = k + 1  # P(X < k + 1) <= 2.5%
    if j < 1:
        return False
    m = quantile(s, 0.5)
    return s[j - 1] >= m * (1 - rel_tol) and s[n - j] <= m * (1 + rel_tol)


def summarize(xs):
    s = sorted(xs)
    return {"median_s": quantile(s, 0.5), "p10_s": quantile(s, 0.1), "p90_s": quantile(s, 0.9),
            "count": len(s)}


# --- the timed step ---------------------------------------------------------------------------

def is_oom(e):
    import torch
    if isinstance(e, MemoryError):
        return True
    oom_t = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_t is not None and isinstance(e, oom_t):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "can't allocate memory" in msg
                                            or "not enough memory" in msg)


class Stepper:
    """One model with its optimizer (wrapped in DDP at world size 1 with --ddp) and the timed
    training step."""

    def __init__(self, a, ms, device, tag):
        import torch
        import torch.distributed as dist
        torch.manual_seed(a.seed)
        self.a, self.ms, self.device = a, ms, device
        self.model = ms.build().to(device)
        self.model.train()
        self.module = self.model
        self.pg_file = None
        if a.ddp:
            from torch.nn.parallel import DistributedDataParallel as DDP
            backend = "nccl" if device.type == "cuda" else "gloo"
            fd, self.pg_file = tempfile.mkstemp(prefix=f"hetsim-profile-{tag}-", suffix=".store")
            os.close(fd)
            os.unlink(self.pg_file)  # the file store creates it
            dist.init_process_group(backend, init_method="file://" + self.pg_file, rank=0,
                                    world_size=1)
            self.model = DDP(self.model, device_ids=[device.index] if device.type == "cuda" else None)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=a.lr, momentum=a.momentum,
                                   weight_decay=a.weight_decay)
        self.lf = loss_fn(a.loss)
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]

    def close(self):
        """Drops the model (and DDP's reducer) while the process group still holds the gloo or
        NCCL group, then destroys the group; no work is in flight between steps."""
        import gc
        import torch.distributed as dist
        self.model = self.module = self.opt = None
        gc.collect()
        if self.a.ddp and dist.is_initialized():
            dist.destroy_process_group()
        if self.pg_file and os.path.exists(self.pg_file):
            os.unlink(self.pg_file)

    def set_batch(self, b, out_shape):
        self.x = None
        self.y = None
        self.x = make_inputs(self.ms, b, self.device, self.a.seed * 1000 + b)
        shape = (b,) + tuple(out_shape[1:])
        self.y = make_targets(self.ms, shape, b, self.device, self.a.loss, self.a.seed * 1000 + b)

    def drop_batch(self):
        import torch
        self.x = self.y = None
        self.opt.zero_grad(set_to_none=True)
        if self.cuda:
            torch.cuda.empty_cache()

    def step(self):
        """One training step; returns (forward, backward, update, step) in seconds."""
        if self.cuda:
            e = self.ev
            e[0].record()
            self.opt.zero_grad(set_to_none=True)
            loss = self.lf(logits_of(self.model(self.x)), self.y)
            e[1].record()
            loss.backward()
            e[2].record()
            self.opt.step()
            e[3].record()
            e[3].synchronize()
            f, b, u = (e[0].elapsed_time(e[1]) / 1e3, e[1].elapsed_time(e[2]) / 1e3,
                       e[2].elapsed_time(e[3]) / 1e3)
            return f, b, u, e[0].elapsed_time(e[3]) / 1e3
        pc = time.process_time if self.a.clock == "process" else time.perf_counter
        t0 = pc()
        self.opt.zero_grad(set_to_none=True)
        loss = self.lf(logits_of(self.model(self.x)), self.y)
        t1 = pc()
        loss.backward()
        t2 = pc()
        self.opt.step()
        t3 = pc()
        return t1 - t0, t2 - t1, t3 - t2, t3 - t0


class LocalSync:
    """The lock-step exchange of one process: nothing to exchange."""
    rank, n = 0, 1

    def share(self, values):
        return [list(values)]


class ProcSync:
    """Lock-step exchange between N processes: each writes its values into its slot of a shared
    array and waits at a barrier; then all read every slot. Two arrays alternate, so that one
    barrier per step is enough (a process cannot write a slot again before every other has
    passed the next barrier, which it reaches after reading)."""
    WIDTH = 6

    def __init__(self, rank, n, barrier, arrays):
        self.rank, self.n, self.barrier, self.arrays, self.turn = rank, n, barrier, arrays, 0

    def share(self, values):
        arr = self.arrays[self.turn]
        self.turn ^= 1
        w = self.WIDTH
        arr[self.rank * w:(self.rank + 1) * w] = list(values)
        self.barrier.wait()
        flat = arr[:]
        return [flat[r * w:(r + 1) * w] for r in range(self.n)]


def time_sweep(a, ms, device, sync, out_shape, say, batches, label=""):
    """Times the batch sizes of `batches`, in that order, in lock-step with the other processes
    of sync. Returns (sets, oom_batch, peaks): sets [(batch, [{phase: [s, ...]} per process, by
    rank])], the raw samples of every process (identical in every process, as they are
    exchanged at each step), peaks {batch: this process's peak CUDA bytes}. The first batch
    that runs out of memory ends the sweep."""
    import torch
    stepper = Stepper(a, ms, device, f"{os.getpid()}")
    sets, peaks, oom_batch = [], {}, None
    try:
        for b in batches:
            oom = False
            try:
                if stepper.cuda:
                    torch.cuda.reset_peak_memory_stats(device)
                stepper.set_batch(b, out_shape)
            except Exception as e:
                if not is_oom(e):
                    raise
                oom = True
            pooled = {p: [] for p in PHASES}
            own = [{p: [] for p in PHASES} for _ in range(sync.n)]
            reps, t_begin, stop = 0, None, False
            while not stop:
                times = (0.0, 0.0, 0.0, 0.0)
                if not oom:
                    try:
                        times = stepper.step()
                    except Exception as e:
                        if not is_oom(e):
                            raise
                        oom = True
                elapsed = time.perf_counter() - t_begin if t_begin is not None else 0.0
                allv = sync.share(list(times) + [1.0 if oom else 0.0, elapsed])
                if any(v[4] for v in allv):
                    oom = True
                    break
                reps += 1
                if reps <= a.warmup:
                    if reps == a.warmup:
                        t_begin = time.perf_counter()
                    continue
                if t_begin is None:  # --warmup 0
                    t_begin = time.perf_counter() - times[3]
                for r, v in enumerate(allv):
                    for i, p in enumerate(PHASES):
                        pooled[p].append(v[i])
                        own[r][p].append(v[i])
                timed = reps - a.warmup
                if timed >= a.max_reps:
                    stop = True
                elif timed >= a.min_reps and median_ci_ok(pooled["step"], a.rel_tol):
                    stop = True
                elif allv[0][5] >= a.budget and timed >= min(MIN_BUDGET_STEPS, a.max_reps):
                    stop = True
            if oom:
                oom_batch = b
                stepper.drop_batch()
                say(f"{label}batch {b}: out of memory; the sweep stops here")
                break
            if stepper.cuda:
                peaks[b] = int(torch.cuda.max_memory_allocated(device))
            sets.append((b, own))
            st = summarize(pooled["step"])
            say(f"{label}batch {b}: step median {st['median_s'] * 1e3:.3f} ms (p10 {st['p10_s'] * 1e3:.3f}, "
                f"p90 {st['p90_s'] * 1e3:.3f}, {st['count']} steps"
                f"{' over ' + str(sync.n) + ' processes' if sync.n > 1 else ''})")
            stepper.drop_batch()
    finally:
        stepper.close()
    return sets, oom_batch, peaks


def merge_peaks(peaks, more):
    """Folds {batch: peak bytes} of another process or round into peaks, keeping the largest."""
    for b, v in (more or {}).items():
        peaks[b] = max(peaks.get(b, 0), v)


def first_oom(oom_batch, oom):
    """The smaller of two out-of-memory batches, either of which may be None."""
    return oom if oom_batch is None else oom_batch if oom is None else min(oom_batch, oom)


def round_order(live, r):
    """The batch order of round r (0-based): increasing, then decreasing, alternately, so that a
    drift of the machine over the rounds reaches small and large batches alike."""
    return list(live) if r % 2 == 0 else list(reversed(live))


def round_label(a, r):
    return f"round {r + 1}/{a.rounds}: " if a.rounds > 1 else ""


def sweep_rounds(a, ms, device, sync, out_shape, say):
    """--rounds sweeps over a.batch_list in the same process(es) (--process-per-batch off), each
    with a fresh model; after an out-of-memory batch, later rounds time only the batches below
    it. Returns (sets, oom_batch, peaks) as time_sweep, sets over all rounds."""
    live, sets, oom_batch, peaks = list(a.batch_list), [], None, {}
    for r in range(a.rounds):
        s, oom, p = time_sweep(a, ms, device, sync, out_shape, say, round_order(live, r),
                               round_label(a, r))
        sets += s
        merge_peaks(peaks, p)
        if oom is not None:
            oom_batch = first_oom(oom_batch, oom)
            live = [b for b in live if b < oom]
        if not live:
            break
    return sets, oom_batch, peaks


def pool_entries(sets, oom_batch, distinct=None):
    """Compute entries from sets [(batch, [{phase: samples} per process])] of every round and
    process group: each (batch, phase) summarised over the samples of all of them. With more
    than one sample set at a batch, "processes" and "process_medians_s" (each set's own median,
    in the order timed) say what was pooled: processes = the sets, each from a fresh process
    (distinct None), or at most `distinct` when the same processes swept every round."""
    by_batch = {}
    for b, procs in sets:
        if oom_batch is None or b < oom_batch:
            by_batch.setdefault(b, []).extend(procs)
    entries = []
    for b in sorted(by_batch):
        procs = by_batch[b]
        for p in PHASES:
            e = dict({"batch": b, "phase": p}, **summarize([x for pr in procs for x in pr[p]]))
            if len(procs) > 1:
                e["processes"] = len(procs) if distinct is None else min(len(procs), distinct)
                e["process_medians_s"] = [quantile(sorted(pr[p]), 0.5) for pr in procs]
            entries.append(e)
    return entries


# --- processes --------------------------------------------------------------------------------

def plan_cpus(n_procs, threads, pin, device):
    """CPU sets per process: process i gets the i-th block of `threads` CPUs among those this
    process may use, when they suffice and pinning is on; otherwise None (no pinning)."""
    if pin == "none" or device.type != "cpu" or not hasattr(os, "sched_getaffinity"):
        return [None] * n_procs
    allowed = sorted(os.sched_getaffinity(0))
    if n_procs * threads > len(allowed):
        return [None] * n_procs
    return [allowed[i * threads:(i + 1) * threads] for i in range(n_procs)]


BLAS_POOL_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_pool(threads):
    """Sizes the BLAS and OpenMP thread pools to `threads` before torch is first imported (they
    are made when the libraries load), unless the user sized them. torch.set_num_threads does
    not reach OpenBLAS's own pool (Debian's torch 1.13 uses OpenBLAS), sized to the CPUs (one
    worker beside the caller on 2 CPUs), made before any pinning and so allowed on every CPU,
    whose worker spins in sched_yield between calls: on this repository's 2-vCPU VM, in half
    of the DDP runs at 344 + 168 samples such a thread in each rank made 0.3-0.9 million
    involuntary context switches of the ranks' compute threads and stretched their steps
    1.3-1.6x (docs/performance.md, "Against PyTorch DDP")."""
    for var in BLAS_POOL_VARS:
        os.environ.setdefault(var, str(threads))


def _new_precision_api():
    """PyTorch 2.9 and later set fp32 precision through fp32_precision and refuse a mix with the
    legacy allow_tf32 flags, so each version is told and read through its own API only."""
    import torch
    conv = getattr(torch.backends.cudnn, "conv", None)
    return conv if conv is not None and hasattr(conv, "fp32_precision") else None


def set_math(math):
    """Applies --math in this process. strict turns TF32 off for convolutions and matmul and asks
    cuDNN for deterministic algorithms; default leaves PyTorch's settings. bench/torch_resnet18.py
    uses this too."""
    import torch
    if math != "strict":
        return
    conv = _new_precision_api()
    if conv is not None:
        conv.fp32_precision = "ieee"
        rnn = getattr(torch.backends.cudnn, "rnn", None)  # as the legacy allow_tf32 covered it
        if rnn is not None and hasattr(rnn, "fp32_precision"):
            rnn.fp32_precision = "ieee"
        torch.backends.cuda.matmul.fp32_precision = "ieee"
    else:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def math_in_force():
    """The settings set_math governs, as they stand in this process (the profile's extra.math)."""
    import torch
    conv = _new_precision_api()
    tf32 = conv.fp32_precision == "tf32" if conv is not None else bool(torch.backends.cudnn.allow_tf32)
    return {"conv_tf32": tf32,
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}


def setup_process(threads, cpus, math="default"):
    import torch
    if cpus:
        os.sched_setaffinity(0, cpus)
    if threads:
        torch.set_num_threads(threads)
    set_math(math)


def _concurrent_child(rank, a, barrier, arrays, queue):
    """One of --concurrent N processes (started by multiprocessing's spawn)."""
    import threading
    try:
        import torch
        setup_process(a.threads, a.cpu_plan[rank], a.math)
        device = torch.device(a.device_str)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        ms = ModelSpec(a.model, a.input_dims, a.classes, a.tokens, a.name)
        sync = ProcSync(rank, a.concurrent, barrier, arrays)
        say = (lambda m: log(a, m)) if rank == 0 else (lambda m: None)
        sets, oom_batch, peaks = sweep_rounds(a, ms, device, sync, a.out_shape, say)
        queue.put(("ok", rank, sets, oom_batch, peaks))
    except threading.BrokenBarrierError:
        queue.put(("aborted", rank, None, None, None))
    except BaseException as e:  # reported by the parent, which exits 1
        try:
            barrier.abort()
        finally:
            queue.put(("error", rank, f"{type(e).__name__}: {e}", None, None))
    hard_exit(queue)


def hard_exit(queue):
    """Ends a child once its report is sent, without tearing down torch.distributed's groups
    (joining gloo's threads while holding the GIL can deadlock with a thread that needs it)."""
    queue.close()
    queue.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_concurrent(a, say):
    """a.concurrent processes time a.batch_list in lock-step (a.rounds sweeps); returns
    (sets, oom_batch, peaks) as sweep_rounds: the samples of every process, which each process
    holds (process 0's report is taken), and the peaks, the largest over the processes."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    n = a.concurrent
    barrier = ctx.Barrier(n)
    arrays = [ctx.Array("d", n * ProcSync.WIDTH, lock=False) for _ in range(2)]
    queue = ctx.Queue()
    procs = [ctx.Process(target=_concurrent_child, args=(r, a, barrier, arrays, queue), daemon=True)
             for r in range(n)]
    for p in procs:
        p.start()
    results, error = {}, None
    while len(results) < n:
        try:
            status, rank, entries, oom_batch, peaks = queue.get(timeout=5)
        except Exception:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead and len(results) < n:
                for p in procs:
                    if p.is_alive():
                        p.terminate()
                raise RunError(f"a profiling process died (exit status {dead[0].exitcode})")
            continue
        results[rank] = (status, entries, oom_batch, peaks)
        if status == "error" and error is None:
            error = f"process {rank}: {entries}"
    for p in procs:
        p.join(timeout=30)
    if error:
        raise RunError(error)
    status, sets, oom_batch, _ = results[0]
    peaks = {}
    for r in range(n):
        merge_peaks(peaks, results[r][3])
    return sets, oom_batch, peaks


# --- communication ----------------------------------------------------------------------------

def comm_sizes(a, grad_bytes):
    if a.comm_size_list is not None:
        sizes = set(a.comm_size_list)
    else:
        sizes, s = {4}, 4096
        while s <= a.comm_max_bytes:
            sizes.add(s)
            s *= 4
        sizes.add(grad_bytes)
    return sorted(4 * max(1, (s + 3) // 4) if s > 0 else 0 for s in sizes)


def comm_sweep(a, rank, world, backend, device, sizes, say):
    """All-reduce (sum over all ranks) and point-to-point (ping-pong between ranks 0 and 1,
    half the round trip) of fp32 buffers, each size timed after a barrier so that ranks arrive
    together. Returns rank 0's entries: per size and op the median, p10, p90 over repetitions of
    the slowest rank's time (all-reduce) or of rank 0's half round trip (p2p)."""
    import torch
    import torch.distributed as dist
    if backend == "gloo":  # gloo sends and receives CPU tensors only: it is timed over the host
        device = torch.device("cpu")
    cuda = device.type == "cuda"

    def sync_dev():
        if cuda:
            torch.cuda.synchronize(device)

    def timed(fn):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            return e0.elapsed_time(e1) / 1e3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def agree_max(values):
        t = torch.tensor(values, dtype=torch.float64, device=device if backend == "nccl" else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    entries = []
    for nbytes in sizes:
        if nbytes == 0:
            continue
        buf = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
        for op in ("allreduce", "p2p"):
            def once():
                if op == "allreduce":
                    dist.all_reduce(buf)
                elif rank == 0:
                    dist.send(buf, 1)
                    dist.recv(buf, 1)
                elif rank == 1:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
            warm = []
            for _ in range(3):
                dist.barrier()
                sync_dev()
                warm.append(timed(once))
            est = agree_max([min(warm)])[0]
            reps = int(max(5, min(a.max_reps, a.comm_budget / max(est, 1e-6))))
            mine = []
            for _ in range(reps):
                dist.barrier()
                sync_dev()
                t = timed(once)
                mine.append(t / 2 if op == "p2p" else t)
            if op == "allreduce":
                mine = agree_max(mine)
            if rank == 0:
                e = dict({"backend": backend, "op": op, "world_size": world if op == "allreduce" else 2,
                          "bytes": nbytes}, **summarize(mine))
                entries.append(e)
                say(f"comm {backend} {op} {nbytes} B: median {e['median_s'] * 1e6:.1f} us "
                    f"({e['count']} ops)")
        del buf
    return entries


STEP_MIN_STEPS = 20    # timed DDP steps of --comm-step at least
STEP_MAX_STEPS = 5000  # and at most


def step_allreduce(a, rank, world, backend, device, say):
    """The gradient's all-reduce as DDP issues it at the end of a training step (--comm-step B):
    the model in DistributedDataParallel over the world, B samples per rank, zero_grad, forward,
    backward, optimizer.step as a training run steps. Per step, each rank's exposed all-reduce is
    the time from its last gradient bucket ready (a comm hook that does what DDP's default does)
    to the end of its backward (DDP waits there for every bucket's all-reduce); the rank that
    arrived last waits for no one, so the step's time is the minimum over the ranks. An isolated
    all-reduce after a barrier can take a different time: on this project's 2-CPU VM gloo's took
    0.2 ms that way and a mean of 2.0 ms in DDP's steps (docs/performance.md). Returns rank 0's
    entry, with the mean beside the quantiles (the simulator charges the mean: one all-reduce a
    step, whose distribution can be bimodal)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    cuda = device.type == "cuda"
    ms = ModelSpec(a.model, a.input_dims, a.classes, a.tokens, a.name)
    torch.manual_seed(a.seed)
    model = ms.build().to(device)
    _, grad_bytes, _ = model_facts(ms, model)  # the profile's model.grad_bytes, as the entry's bytes
    ddp = DDP(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    lf = loss_fn(a.loss)
    b = a.comm_step
    x = make_inputs(ms, b, device, a.seed * 1000 + b)
    y = make_targets(ms, (b,) + tuple(a.out_shape[1:]), b, device, a.loss, a.seed * 1000 + b)
    marks = []  # this step's bucket-ready marks: perf_counter values, or CUDA events

    def mark():
        if cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def hook(_state, bucket):  # DDP's default all-reduce (divide by the world, sum), timed
        marks.append(mark())
        buf = bucket.buffer() if callable(getattr(bucket, "buffer", None)) else bucket.get_tensor()
        buf.div_(world)
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

    ddp.register_comm_hook(None, hook)

    def one_step():
        marks.clear()
        opt.zero_grad(set_to_none=True)
        lf(logits_of(ddp(x)), y).backward()
        end = mark()
        opt.step()
        if cuda:
            end.synchronize()
            return marks[-1].elapsed_time(end) / 1e3, len(marks)
        return end - marks[-1], len(marks)

    t0 = time.perf_counter()
    for _ in range(max(2, a.warmup)):
        one_step()
    est = torch.tensor([(time.perf_counter() - t0) / max(2, a.warmup)], dtype=torch.float64)
    est = est.to(device) if backend == "nccl" else est
    dist.all_reduce(est, op=dist.ReduceOp.MAX)  # every rank runs the same number of steps
    steps = int(max(STEP_MIN_STEPS, min(STEP_MAX_STEPS, a.comm_budget / max(est.item(), 1e-6))))
    tails, buckets = [], 0
    for _ in range(steps):
        t, buckets = one_step()
        tails.append(t)
    mine = torch.tensor(tails, dtype=torch.float64)
    mine = mine.to(device) if backend == "nccl" else mine
    dist.all_reduce(mine, op=dist.ReduceOp.MIN)  # the last to arrive waits for no one
    last = mine.tolist()
    del ddp, model, opt
    if rank != 0:
        return None
    e = dict({"backend": backend, "op": "allreduce_step", "world_size": world, "bytes": grad_bytes,
              "batch": b, "buckets": buckets}, **summarize(last))
    e["mean_s"] = sum(last) / len(last)
    say(f"comm {backend} allreduce_step {grad_bytes} B (DDP's steps at batch {b}, {buckets} "
        f"bucket{'s' if buckets != 1 else ''}): mean {e['mean_s'] * 1e6:.1f} us, median "
        f"{e['median_s'] * 1e6:.1f} us ({e['count']} steps)")
    return e


def comm_measure(a, rank, world, backend, device, say):
    """comm_sweep's entries, and with --comm-step the all-reduce as DDP issues it."""
    entries = comm_sweep(a, rank, world, backend, device, a.comm_size_vals, say)
    if a.comm_step:
        e = step_allreduce(a, rank, world, backend, device, say)
        if e is not None:
            entries.append(e)
    return entries


def _comm_child(rank, a, init_file, queue):
    try:
        import torch
        import torch.distributed as dist
        setup_process(1, a.comm_cpu_plan[rank])
        device = torch.device(a.comm_devices[rank])
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(a.comm_backend_name, init_method="file://" + init_file, rank=rank,
                                world_size=a.comm_world,
                                timeout=datetime.timedelta(seconds=max(600.0, 40 * a.comm_budget * 30)))
        say = (lambda m: log(a, m)) if rank == 0 else (lambda m: None)
        entries = comm_measure(a, rank, a.comm_world, a.comm_backend_name, device, say)
        dist.barrier()
        queue.put(("ok", rank, entries))
    except BaseException as e:
        queue.put(("error", rank, f"{type(e).__name__}: {e}"))
    hard_exit(queue)


def run_comm_local(a, device, say):
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    w = a.comm_world
    a.comm_cpu_plan = plan_cpus(w, 1, a.pin, device)
    if device.type == "cuda" and a.comm_backend_name == "nccl":
        a.comm_devices = [f"cuda:{(device.index + r) % max(1, _cuda_count())}" for r in range(w)]
    else:
        a.comm_devices = [str(device) if device.type == "cuda" else "cpu"] * w
    tmpdir = tempfile.mkdtemp(prefix="hetsim-profile-comm-")
    init_file = os.path.join(tmpdir, "store")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_comm_child, args=(r, a, init_file, queue), daemon=True)
             for r in range(w)]
    for p in procs:
        p.start()
    results = {}
    try:
        while len(results) < w:
            try:
                status, rank, payload = queue.get(timeout=5)
            except Exception:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RunError(f"a communication process died (exit status {dead[0].exitcode})")
                continue
            if status == "error":
                raise RunError(f"--comm: process {rank}: {payload}")
            results[rank] = payload
    finally:
        for p in procs:
            if p.is_alive() and len(results) < w:
                p.terminate()
            p.join(timeout=30)
        with contextlib.suppress(OSError):
            os.unlink(init_file)
        with contextlib.suppress(OSError):
            os.rmdir(tmpdir)
    return results[0]


def _cuda_count():
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


# --- device information -----------------------------------------------------------------------

def cpu_model_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    v = line.split(":", 1)[1].strip()
                    if v:
                        return v
    except OSError:
        pass
    return platform.processor() or "cpu"


def cuda_driver_version():
    """The CUDA driver's API version as hetsim calib stores it ("12.4"), or None."""
    for lib in ("libcuda.so.1", "libcuda.so"):
        try:
            cu = ctypes.CDLL(lib)
        except OSError:
            continue
        v = ctypes.c_int(0)
        if cu.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value > 0:
            return f"{v.value // 1000}.{(v.value % 1000) // 10}"
    return None


def device_info(a, device):
    import torch
    info = {"name": a.device_name or None, "kind": device.type}
    if device.type == "cpu":
        info["name"] = info["name"] or cpu_model_name()
        try:
            info["memory_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            info["memory_bytes"] = None
        info["sm_count"] = a.threads  # the cpu: cores one timed process uses
        info["compute_capability"] = None
    else:
        p = torch.cuda.get_device_properties(device)
        info["name"] = info["name"] or p.name
        info["memory_bytes"] = int(p.total_memory)
        info["sm_count"] = int(p.multi_processor_count)
        info["compute_capability"] = f"{p.major}.{p.minor}"
        info["driver_version"] = cuda_driver_version()
        info["cuda_version"] = torch.version.cuda
        v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        if v:
            major, rest = (v // 10000, v % 10000) if v >= 90000 else (v // 1000, v % 1000)
            info["cudnn_version"] = f"{major}.{rest // 100}.{rest % 100}"
        else:
            info["cudnn_version"] = None
        try:
            nv = torch.cuda.nccl.version()
            info["nccl_version"] = ".".join(map(str, nv)) if isinstance(nv, tuple) else (
                f"{nv // 1000}.{nv % 1000 // 100}.{nv % 100}" if nv < 10000 else
                f"{nv // 10000}.{nv % 10000 // 100}.{nv % 100}")
        except Exception:
            info["nccl_version"] = None
    info["torch_version"] = torch.__version__
    info["host"] = socket.gethostname()
    info["threads"] = a.threads if device.type == "cpu" else torch.get_num_threads()
    return info


# --- convergence curves -----------------------------------------------------------------------

def _read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def curve_data(a, ms):
    """(x_train, y_train, x_eval, y_eval) on the CPU; x_train is None for the synthetic task,
    whose training samples are drawn fresh by y_train(n)."""
    import torch
    cd = a.curve_data
    if cd == "synthetic":
        # A teacher in a 16-dimensional latent space: z ~ N(0, I), the input is a fixed random
        # embedding of z plus as much Gaussian noise (unit variance per element overall), the
        # label is drawn from softmax(8 z W). The task is learnable, its Bayes accuracy below 1
        # and its loss floor above 0, as real data's are; training samples are drawn fresh at
        # every step (no overfitting a small set), evaluation samples once.
        if ms.classes is None:
            raise UsageError("--curves synthetic: the model's classes are unknown (give --classes)")
        g = torch.Generator().manual_seed(a.seed + 17)
        d, k = math.prod(ms.input), 16
        emb = torch.randn(k, d, generator=g) / math.sqrt(k)
        w = torch.randn(k, ms.classes, generator=g) / math.sqrt(k)

        def draw(n):
            z = torch.randn(n, k, generator=g)
            x = ((z @ emb) + torch.randn(n, d, generator=g)) / math.sqrt(2.0)
            y = torch.multinomial(torch.softmax(8.0 * (z @ w), dim=1), 1, generator=g).squeeze(1)
            return x.reshape((n,) + tuple(ms.input)), y
        xe, ye = draw(a.curve_eval_samples)
        return None, draw, xe, ye
    if cd.startswith("fashion-mnist"):
        folder = cd.split(":", 1)[1] if ":" in cd else FASHION_MNIST_DIR
        if tuple(ms.input) not in ((1, 28, 28), (784,)):
            raise UsageError(f"--curve-data fashion-mnist: 1x28x28 images, the model takes "
                             f"{ms.input_str()}")

        def load(split, limit=None):
            dims, xb = _read_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz"))
            _, yb = _read_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz"))
            n = dims[0] if limit is None else min(limit, dims[0])
            x = torch.frombuffer(bytearray(xb[:n * 784]), dtype=torch.uint8).float().div(255)
            x = ((x - FASHION_MNIST_MEAN) / FASHION_MNIST_STD).reshape((n,) + tuple(ms.input))
            y = torch.frombuffer(bytearray(yb[:n]), dtype=torch.uint8).long()
            return x, y
        xt, yt = load("train")
        xe, ye = load("t10k", a.curve_eval_samples)
        return xt, yt, xe, ye
    try:
        obj = torch.load(cd, map_location="cpu")
    except Exception as e:
        raise UsageError(f"--curve-data {cd}: cannot load: {type(e).__name__}: {e}")
    if isinstance(obj, (tuple, list)) and len(obj) in (2, 4):
        obj = dict(zip(("x", "y", "x_test", "y_test"), obj))
    if not isinstance(obj, dict) or "x" not in obj or "y" not in obj:
        raise UsageError(f"--curve-data {cd}: expected a dict with 'x' and 'y' (and optionally "
                         "'x_test', 'y_test') or a tuple (x, y[, x_test, y_test])")
    x, y = obj["x"], obj["y"]
    if "x_test" in obj and "y_test" in obj:
        xe, ye = obj["x_test"], obj["y_test"]
    else:  # the last tenth held out
        k = max(1, len(x) // 10)
        x, y, xe, ye = x[:-k], y[:-k], x[-k:], y[-k:]
    if tuple(x.shape[1:]) != tuple(ms.input):
        raise UsageError(f"--curve-data {cd}: samples of shape {tuple(x.shape[1:])}, the model "
                         f"takes {ms.input_str()}")
    return x, y.long(), xe[:a.curve_eval_samples], ye[:a.curve_eval_samples].long()


def run_curves(a, ms, device, say, seed, period=1):
    """A short real training run (one process, SGD with momentum) writing the held-out loss and
    accuracy at evenly spaced numbers of samples. Returns the rows; with --curve-seeds above 1
    each has the seed.

    period 1: one model steps on batches of --curve-batch. period T > 1: local SGD, as PyTorch's
    PeriodicModelAverager does it across processes (bench/ddp_train.py --local-period): N =
    --curve-workers replicas start from the same weights, each with its own optimizer (momentum
    buffers its own); at every step replica w takes the w-th of N equal shares of the step's
    batch, and after every T-th step their parameters are replaced by the mean. Evaluations fall
    on averages (the nearest multiples of T), where the replicas are equal."""
    import torch
    import torch.nn.functional as F
    xt, yt, xe, ye = curve_data(a, ms)
    torch.manual_seed(seed)
    model = ms.build().to(device)
    n_workers = 1 if period == 1 else a.curve_workers
    replicas = [model] + [copy.deepcopy(model) for _ in range(n_workers - 1)]
    opts = [torch.optim.SGD(m.parameters(), lr=a.curve_lr, momentum=a.momentum,
                            weight_decay=a.weight_decay) for m in replicas]
    n_train = len(xt) if xt is not None else a.curve_train_samples  # synthetic: a nominal epoch
    total = int(round(a.curve_epochs * n_train))
    b = min(a.curve_batch, n_train)
    if b % n_workers:
        raise UsageError(f"--curve-batch: {b} samples do not split over {n_workers} workers")
    share = b // n_workers
    steps = max(period, total // b // period * period)
    evals = sorted({period * round(steps * k / a.curve_evals / period) for k in range(a.curve_evals + 1)})
    g = torch.Generator().manual_seed(seed + 3)
    perm, pos = (torch.randperm(n_train, generator=g) if xt is not None else None), 0

    def evaluate():
        model.eval()
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for i in range(0, len(xe), 512):
                out = logits_of(model(xe[i:i + 512].to(device)))
                yy = ye[i:i + 512].to(device)
                loss_sum += float(F.cross_entropy(out, yy, reduction="sum"))
                correct += int((out.argmax(1) == yy).sum())
        model.train()
        return loss_sum / len(xe), correct / len(xe)

    rows = []
    for step in range(steps + 1):
        if step in evals:
            loss, acc = evaluate()
            if not math.isfinite(loss):
                raise RunError(f"--curves: the loss is {loss} after {step * b} samples (lower "
                               "--curve-lr)")
            rows.append({"samples": step * b, "epoch": round(step * b / n_train, 6),
                         "loss": round(loss, 6), "accuracy": round(acc, 6), "batch": share,
                         "workers": n_workers, "policy": "ssgd" if period == 1 else "localsgd"})
            if len(a.curve_period_list) > 1 or period > 1:
                rows[-1]["period"] = period if period > 1 else ""
            if a.curve_seeds > 1:
                rows[-1]["seed"] = seed
            say(f"curves: {'seed %d: ' % seed if a.curve_seeds > 1 else ''}"
                f"{'period %d: ' % period if period > 1 else ''}{step * b} samples: "
                f"loss {loss:.4f}, accuracy {acc:.4f}")
        if step == steps:
            break
        if xt is None:
            xb, yb = yt(b)
        else:
            if pos + b > n_train:
                perm, pos = torch.randperm(n_train, generator=g), 0
            idx = perm[pos:pos + b]
            pos += b
            xb, yb = xt[idx], yt[idx]
        for w, (m, opt) in enumerate(zip(replicas, opts)):
            opt.zero_grad(set_to_none=True)
            xw, yw = xb[w * share:(w + 1) * share], yb[w * share:(w + 1) * share]
            F.cross_entropy(logits_of(m(xw.to(device))), yw.to(device)).backward()
            opt.step()
        if n_workers > 1 and (step + 1) % period == 0:
            with torch.no_grad():
                for ps in zip(*(m.parameters() for m in replicas)):
                    mean = torch.stack(ps).mean(0)
                    for p in ps:
                        p.copy_(mean)
    return rows


# --- output -----------------------------------------------------------------------------------

def write_atomic(path, write):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".hetsim-profile-", dir=d)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def main(argv=None):
    a = build_parser().parse_args(argv)
    try:
        return run(a)
    except UsageError as e:
        print(f"hetsim_profile.py: {e}", file=sys.stderr)
        return 2
    except RunError as e:
        print(f"hetsim_profile.py: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hetsim_profile.py: interrupted; nothing written", file=sys.stderr)
        return 1


def run(a):
    check_args(a)
    # The arguments that need no torch are checked before importing it (a second or two).
    d = a.device.strip()
    if not (d in ("cpu", "cuda") or (d.startswith("cuda:") and d[5:].isdigit())):
        raise UsageError(f"--device: expected cpu, cuda or cuda:I, got \"{a.device}\"")
    ms = ModelSpec(a.model, a.input_dims, a.classes, a.tokens, a.name)
    if d == "cpu":
        limit_blas_pool(a.threads or 1)
    try:
        import torch
    except ImportError as e:
        raise RunError(f"cannot import torch ({e}; Debian: apt-get install python3-torch)")
    import torch.distributed as dist
    tr = torchrun_env()
    device = parse_device(a.device)
    if tr and device.type == "cuda":
        device = torch.device("cuda", tr[2])
        if tr[2] >= torch.cuda.device_count():
            raise UsageError(f"LOCAL_RANK {tr[2]}: this machine has {torch.cuda.device_count()} GPUs")
    if a.threads is None:
        a.threads = 1 if device.type == "cpu" else None
    say = (lambda m: log(a, m))
    if tr and tr[0] != 0:
        say = (lambda m: None)
    a.comm_backend_name = a.comm_backend or ("nccl" if device.type == "cuda" else "gloo")
    want_comm = a.comm or (tr is not None and tr[1] > 1)
    if a.comm_step and not want_comm:
        raise UsageError("--comm-step needs --comm (or torchrun's ranks): it runs in the "
                         "communication processes")
    if (a.ddp or want_comm) and not dist.is_available():
        raise UsageError("--ddp/--comm: this torch has no torch.distributed")
    if want_comm:
        if a.comm_backend_name == "nccl" and device.type != "cuda":
            raise UsageError("--comm-backend nccl needs --device cuda")
        if a.comm_backend_name == "nccl" and not tr and _cuda_count() < a.comm_world:
            raise UsageError(f"--comm with nccl over {a.comm_world} processes needs {a.comm_world} "
                             f"GPUs (NCCL takes one GPU per rank); this machine has {_cuda_count()} "
                             "(--comm-backend gloo times gloo over the host)")
        if tr and tr[1] < 2:
            raise UsageError("--comm under torchrun needs at least 2 ranks (WORLD_SIZE is 1)")
    if a.ddp and device.type == "cuda" and not dist.is_nccl_available():
        raise UsageError("--ddp on cuda: this torch has no NCCL")
    if a.ddp and device.type == "cpu" and not dist.is_gloo_available():
        raise UsageError("--ddp on cpu: this torch has no gloo")

    a.cpu_plan = plan_cpus(a.concurrent, a.threads or 1, a.pin, device)
    setup_process(a.threads, a.cpu_plan[0] if a.concurrent == 1 and not tr else None, a.math)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(a.seed)
    model = ms.build().to(device)
    out_shape = probe(ms, model, device)
    if a.loss == "cross_entropy":
        if ms.classes is not None and out_shape[1] != ms.classes and ms.kind == "factory":
            raise UsageError(f"--classes {ms.classes}: the model's output has {out_shape[1]} "
                             "classes in dim 1")
        ms.classes = out_shape[1]
    params, grad_bytes, dtypes = model_facts(ms, model)
    if params == 0:
        raise UsageError(f"--model {ms.spec}: no trainable parameters")
    flops, flops_method = count_flops(ms, model, device)
    model_doc = {"name": ms.name, "origin": ms.spec if ms.kind != "builtin" else f"builtin:{ms.spec}",
                 "params": params, "grad_bytes": grad_bytes, "flops_per_sample": flops,
                 "input": ms.input_str() + (f" int64<{ms.tokens}" if ms.tokens else ""),
                 "loss": a.loss}
    if ms.kind == "builtin":
        model_doc["description"] = f"hetsim zoo {ms.spec}, layer for layer (nn/nn_zoo.c)"
    if a.describe:
        print(json.dumps(dict(model_doc, classes=ms.classes, flops_method=flops_method,
                              param_dtypes=dtypes), indent=2))
        return 0
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()

    a.device_str, a.out_shape = str(device), out_shape
    comm_entries = []
    if want_comm:
        a.comm_size_vals = comm_sizes(a, grad_bytes)
        if tr:
            rank, world, _ = tr
            setup_process(1, None)
            dist.init_process_group(a.comm_backend_name, init_method="env://",
                                    timeout=datetime.timedelta(seconds=3600))
            comm_entries = comm_measure(a, rank, world, a.comm_backend_name, device, say)
            dist.barrier()
            dist.destroy_process_group()
            if rank != 0:  # rank 0 times the compute and writes the profile alone
                return 0
            setup_process(a.threads, None, a.math)
        else:
            say(f"comm: {a.comm_backend_name} over {a.comm_world} processes, "
                f"{len(a.comm_size_vals)} sizes")
            comm_entries = run_comm_local(a, device, say)

    mode = "ddp" if a.ddp else "plain"
    say(f"{ms.name} ({params} parameters) on {device}: "
        f"batches {','.join(map(str, a.batch_list))}, {mode}, {a.concurrent} process"
        f"{'es' if a.concurrent > 1 else ''}, {a.threads or torch.get_num_threads()} thread(s) each")
    a.per_batch = a.process_per_batch == "on" or (a.process_per_batch == "auto" and device.type == "cpu")
    if a.per_batch:
        # Each batch size in fresh processes (run_concurrent also serves one), round after
        # round in alternating order; the first that runs out of memory ends round 1, as one
        # sweep would, and later rounds time only the batches below it.
        sets, oom_batch, peaks, batches, rounds = [], None, {}, a.batch_list, a.rounds
        live = list(batches)
        a.rounds = 1  # each child times one batch once
        try:
            for r in range(rounds):
                for b in round_order(live, r):
                    if oom_batch is not None and b >= oom_batch:
                        continue
                    if rounds > 1:
                        say(f"round {r + 1}/{rounds}: batch {b} in fresh processes")
                    a.batch_list = [b]
                    s, oom, p = run_concurrent(a, say)
                    sets += s
                    merge_peaks(peaks, p)
                    if oom is not None:
                        oom_batch = first_oom(oom_batch, oom)
                        if r == 0:
                            break
                live = [b for b in live if oom_batch is None or b < oom_batch]
        finally:
            a.batch_list, a.rounds = batches, rounds
        distinct = None  # every sample set comes from a fresh process
    else:
        if a.concurrent == 1:
            sets, oom_batch, peaks = sweep_rounds(a, ms, device, LocalSync(), out_shape, say)
        else:
            sets, oom_batch, peaks = run_concurrent(a, say)
        distinct = a.concurrent  # the same processes sweep every round
    entries = pool_entries(sets, oom_batch, distinct)
    if not entries:
        raise RunError(f"batch {a.batch_list[0]} already runs out of memory: no step timed; "
                       "nothing written")
    for e in entries:
        e["peak_memory_bytes"] = peaks.get(e["batch"])

    curves = None
    if a.curves:
        setup_process(a.threads, a.cpu_plan[0], a.math)
        curves = [r for k in range(a.curve_seeds) for t in a.curve_period_list
                  for r in run_curves(a, ms, device, say, a.seed + k, t)]

    dev_info = device_info(a, device)
    extra = {
        "flops_method": flops_method,
        "timer": "CUDA events" if device.type == "cuda" else (
            "time.process_time (CPU time of the process)" if a.clock == "process" else "time.perf_counter"),
        "phases": "forward = zero_grad + forward + loss; backward = loss.backward(); update = "
                  "optimizer.step(); step = the three timed together",
        "batch_order": "increasing" if a.rounds == 1 else "alternating",
        "rounds": a.rounds,
        "process_per_batch": a.per_batch,
        "warmup": a.warmup, "min_reps": a.min_reps, "max_reps": a.max_reps,
        "rel_tol": a.rel_tol, "budget_s": a.budget,
        "optimizer": {"lr": a.lr, "momentum": a.momentum, "weight_decay": a.weight_decay},
        "math": {"option": a.math, **math_in_force()},
        "pinned_cpus": a.cpu_plan if any(a.cpu_plan) else None,
        "cpus_online": os.cpu_count(),
        "peak_memory": "torch.cuda.max_memory_allocated, the largest over the processes"
                       if device.type == "cuda" else "not measured on the cpu",
        "python": platform.python_version(),
        "command": [os.path.basename(sys.argv[0])] + (sys.argv[1:] if sys.argv else []),
    }
    try:
        import torchvision
        extra["torchvision_version"] = torchvision.__version__
    except ImportError:
        pass
    except Exception as e:  # a torchvision built for another torch fails with RuntimeError
        extra["torchvision_version"] = f"not importable: {e}"
    if tr:
        extra["torchrun"] = {"world_size": tr[1]}
    if curves is not None:
        extra["curves_file"] = os.path.abspath(a.curves)
        extra["curve_seeds"] = list(range(a.seed, a.seed + a.curve_seeds))
        extra["curve_periods"] = a.curve_period_list
        extra["curve_workers"] = a.curve_workers if any(t > 1 for t in a.curve_period_list) else 1
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tool": TOOL,
        "device": dev_info,
        "model": model_doc,
        "execution": {"mode": mode, "world_size": 1, "concurrent": a.concurrent,
                      "dtype": dtypes[0] if len(dtypes) == 1 else ",".join(dtypes),
                      "optimizer": "sgd"},
        "compute": entries,
        "oom_batch": oom_batch,
    }
    if comm_entries:
        doc["comm"] = comm_entries
    doc["extra"] = extra
    if curves is not None:
        def write_csv(f):
            w = csv.DictWriter(f, fieldnames=["samples", "epoch", "loss", "accuracy", "batch", "workers", "policy"]
                               + (["period"] if a.curve_period_list != [1] else [])
                               + (["seed"] if a.curve_seeds > 1 else []),
                               lineterminator="\n")
            w.writeheader()
            w.writerows(curves)
        write_atomic(a.curves, write_csv)
    write_atomic(a.out, lambda f: (json.dump(doc, f, indent=1, allow_nan=False), f.write("\n")))
    say(f"wrote {a.out}" + (f" and {a.curves}" if curves is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
