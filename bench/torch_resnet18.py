#!/usr/bin/env python3
"""PyTorch counterpart of bench_gpu_nn: CIFAR ResNet-18 training throughput (images/s).

The model is nn_zoo's resnet18 layer for layer (kuangliu/pytorch-cifar: 3x3 stem conv, no max
pool, BasicBlocks [2, 2, 2, 2], 1x1 conv + BatchNorm shortcuts where the shape changes, global
average pool, one linear layer; 11,173,962 parameters, which the script checks). fp32, NCHW,
SGD lr 0.1, momentum 0.9, weight decay 5e-4, one synthetic batch loaded once. On a GPU the timed
steps run between two CUDA events, as bench_gpu_nn times them; on the cpu (--device cpu, which
the tests use) between two wall-clock readings.

    python3 bench/torch_resnet18.py [--batch 256] [--steps 50] [--warmup 10] [--device cuda:0]
                                    [--math default|strict] [--graph] [--json]

--math default keeps PyTorch's own settings (TF32 allowed for convolutions, not for matmul;
cuDNN may pick non-deterministic algorithms): the counterpart of HETSIM_CUDA_MATH=fast.
--math strict turns TF32 off for both and asks cuDNN for deterministic algorithms: the
counterpart of hetsim's default, HETSIM_CUDA_MATH=strict. --graph captures the whole step
(forward, backward, SGD) as one CUDA graph after the warm-up and replays it, as
bench_gpu_nn --graph does (PyTorch's "whole network capture"). Exit status: 0, 77 when the
device is a GPU and none is usable, 2 on bad usage, 1 on a failure.

Compare with: build/bench_gpu_nn --model resnet18 --batch 256 --steps 50 --warmup 10 [--graph]
(HETSIM_CUDA_MATH=fast for --math default)
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# The two maths are defined once, in the profiler (the same folder layout in the repository and
# in the GPU bundle: bench/ beside tools/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from hetsim_profile import math_in_force, set_math  # noqa: E402

EXPECTED_PARAMS = 11_173_962


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride, 0, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, in_planes = [], 64
        for planes, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            for s in (stride, 1):
                layers.append(BasicBlock(in_planes, planes, s))
                in_planes = planes
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(512, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layers(out)
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)  # the 4x4 map: a global pool
        return self.linear(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--math", choices=("default", "strict"), default="default")
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.batch < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--batch and --steps must be at least 1, --warmup at least 0")
    try:
        dev = torch.device(a.device)
    except RuntimeError as e:
        ap.error(f"--device {a.device}: {e}")
    cuda = dev.type == "cuda"
    if dev.type not in ("cuda", "cpu"):
        ap.error(f"--device {a.device}: cuda:I or cpu")
    if a.graph and not cuda:
        ap.error("--graph needs a CUDA device")
    if cuda and not torch.cuda.is_available():
        print("no GPU: torch.cuda.is_available() is False")
        return 77
    if cuda:
        # Events recorded without a stream, the graph and the side stream use the current device.
        torch.cuda.set_device(dev)
    # A graph needs at least one warm-up step on a side stream (the momentum buffers exist
    # before capture, and lazy initialisation stays out of the graph).
    warmup = max(a.warmup, 1) if a.graph else a.warmup
    set_math(a.math)
    tf32 = math_in_force()["conv_tf32"]

    torch.manual_seed(1)
    model = ResNet18().to(dev)
    params = sum(p.numel() for p in model.parameters())
    if params != EXPECTED_PARAMS:
        print(f"resnet18 has {params} parameters, expected {EXPECTED_PARAMS}", file=sys.stderr)
        return 1
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    x = torch.rand(a.batch, 3, 32, 32, device=dev) * 2 - 1
    y = torch.arange(a.batch, device=dev) % 10
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if a.graph:
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(warmup):
                step()
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = F.cross_entropy(model(x), y)
            static_loss.backward()
            opt.step()

        def run():
            graph.replay()
            return static_loss

        # The first launch uploads the graph: untimed, as bench_gpu_nn --graph does.
        graph.replay()
    else:
        for _ in range(warmup):
            step()
        run = step

    if cuda:
        torch.cuda.synchronize(dev)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.steps):
            loss = run()
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
        name = torch.cuda.get_device_name(dev)
    else:
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = run()
        seconds = time.perf_counter() - t0
        name = "cpu"
    ips = a.batch * a.steps / seconds
    if a.json:
        print(json.dumps({"model": "resnet18", "framework": f"torch {torch.__version__}",
                          "device": name, "batch": a.batch, "steps": a.steps, "math": a.math,
                          "conv_tf32": tf32, "graph": a.graph, "step_s": seconds / a.steps,
                          "images_per_s": ips, "loss": loss.item()}))
    else:
        print(f"torch {torch.__version__} resnet18 on {name}, batch {a.batch}, {a.steps} steps, "
              f"math {a.math}{' (CUDA graph)' if a.graph else ''}: {1e3 * seconds / a.steps:.3f} ms/step, "
              f"{ips:.1f} images/s (loss {loss.item():.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
