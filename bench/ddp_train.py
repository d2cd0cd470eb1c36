#!/usr/bin/env python3
"""ddp_train.py: real PyTorch DistributedDataParallel training (gloo, N processes on this host, one
thread each, each pinned to its own CPU) with per-rank batch sizes and slowdowns, recording
per-iteration times per rank. It is the reference that hetsim's predictions are compared with
(issue 15, section 4); nothing in it comes from hetsim.

    python3 bench/ddp_train.py --model cnn --batches 64,64 --iterations 50 --out ddp.json
    python3 bench/ddp_train.py --model cnn --batches 64,64 --slowdown 1:2 --out slow.json
    python3 bench/ddp_train.py --model cnn --batches 86,42 --slowdown 1:2 --out lbb.json
    python3 bench/ddp_train.py --model cnn --batches 64,64 --data fashion-mnist --eval-every 50 \
        --target-accuracy 0.85 --out ttt.json        # time to a target accuracy

Models: as tools/hetsim_profile.py (mlp, cnn, resnet18, vgg16, mobilenetv2 built in layer for
layer as hetsim's zoo, torchvision:NAME, module.path:factory with --input).
Data (--data):
  synthetic (default): random fp32 inputs and random labels, four batches per rank made before
    training and cycled (nothing to learn: for timing only).
  fashion-mnist[:DIR] (DIR default /usr/share/datasets/fashion-mnist, Debian's
    dataset-fashion-mnist): the 60000 training images, and the first --eval-samples (2000) test
    images as the evaluation set, loaded and normalised as tools/hetsim_profile.py --curve-data
    fashion-mnist does (its curve_data, called by every rank); the model must take 1x28x28 or
    784 inputs and give >= 10 classes. Sampling: one random permutation of the training set,
    the same on every rank (a torch.Generator seeded with --seed + 3, as the profiler's curves),
    consumed in global batches of B = sum of the b_r: within a global batch rank r takes its b_r
    samples at offset b_0 + ... + b_(r-1). A new permutation is drawn when the next global
    batch would run past the end of the current one. So every step trains on a uniformly random
    batch of B samples, the batch one process at batch B sees; with the same --seed (and hence
    the same initial weights) the run follows the profiler's curve at --curve-batch B up to
    floating-point rounding.
The world size is the number of --batches. Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT set) this process is one rank and --batches must list WORLD_SIZE batches; otherwise
it starts the N ranks itself (multiprocessing, spawn) with a file store.

One iteration on rank r (batch b_r, slowdown f_r, B = sum of the b_r, N ranks):
  1. slowdown: --slow-mode repeat (default; f_r an integer): f_r - 1 extra forward+backward
     passes under DDP's no_sync() (local, no all-reduce), their gradients then zeroed; or
     --slow-mode sleep: time.sleep((f_r - 1) x this rank's compute time of the previous
     iteration), so the rank arrives late at the all-reduce as a slower device would;
  2. zero_grad, forward, loss = mean cross-entropy over the rank's samples x N b_r / B (DDP
     averages the ranks' gradients, dividing by N, so the update is the gradient of the mean
     loss over the global batch: sum_r (b_r / B) grad_r);
  3. backward: DDP all-reduces the gradient buckets as they fill, overlapped with the rest of
     the backward; backward() returns once every bucket is reduced;
  4. optimizer.step() (SGD with momentum).
There is no barrier between iterations: the ranks meet in the all-reduce, as in real training.

Local SGD (--local-period T): no DDP and no gradient all-reduce. Each rank takes its own SGD
steps (step 2 without the scaling, as the batches must be equal) on its own model, and after
every T-th iteration PyTorch's own PeriodicModelAverager
(torch.distributed.algorithms.model_averaging.averagers, period T, warm-up T - 1 steps so that
the averages come after iterations T, 2T, ...) averages the parameters over the ranks (a gloo
all-reduce); the momentum buffers stay each rank's own, as in PyTorch's post-local SGD. With
--eval-every K, K must be a multiple of T, so that every evaluation sees an averaged model.
T = 1 averages the models after every step.

Iterations run: --warmup + --iterations; or, with --target-accuracy, until the first evaluation
that reaches the target, at most --max-iterations (warm-up included). Warm-up iterations are
real training steps (with real data they consume samples, and they count in the evaluations'
iter, samples and train_time_s); they are only left out of the summary. With --eval-every the
warm-up defaults to 0.

Evaluation (--eval-every K > 0): before iteration 0 and after every K iterations (iterations
0, K, 2K, ... completed; none after a last iteration that is not a multiple of K). All ranks
enter dist.barrier(); rank 0 evaluates the model (its replica, the module inside DDP, whose
forward on one rank alone would hang in DDP's buffer broadcast; model.eval(), no_grad,
batches of 512: mean cross-entropy and argmax accuracy over the evaluation samples, as the
profiler's curves evaluate); rank 0 broadcasts whether the target is met (or the loss is not
finite), and all ranks then stop together or pass a second dist.barrier() and go on training.
With --data synthetic (no target allowed) the evaluation set is --eval-samples random inputs
and labels (chance accuracy): only to measure the pauses.

Training clock: with S_j the earliest start over the ranks of the first iteration after
evaluation j (or of iteration 0) and E_j the latest end over the ranks of the last iteration
before evaluation j+1, the ranks trained during [S_j, E_j] and paused for evaluation between
E_j and S_(j+1) (the barriers, the evaluation and the broadcast; the wait for the slowest
rank's last step is before E_j, so it is training). train_time_s at an evaluation = the sum of
E_k - S_k over the training segments before it: the wall time from the start of training to
that evaluation less every evaluation pause, measured as the summary's iteration times are
(latest end of an iteration over the ranks).

Timing (time.perf_counter, CLOCK_MONOTONIC, common to the processes of one host). A DDP comm hook
that does what DDP's default does (divide by N, all-reduce, async) records when each bucket is
ready (the backward produced all its gradients) and when its all-reduce completes (--no-hook
runs DDP's built-in all-reduce instead; then the split below is null).

Output (--out FILE.json, or FILE.csv for the per-iteration rows only), written by rank 0:
  JSON: {"format": "hetsim-ddp-bench", "version": 1, "model": {name, origin, params,
  grad_bytes, input}, "world_size", "batches": [b_r], "global_batch", "slowdowns": [f_r],
  "slow_mode", "iterations", "warmup", "threads", "cpus": [[cpu...] or null per rank],
  "backend": "gloo", "comm_hook": bool, "bucket_cap_mb", "local_period" (T, or null under
  DDP), "torch_version", "host", "created_at",
  With --data fashion-mnist or --eval-every, also: "data" ("synthetic" or "fashion-mnist"),
  "data_dir" (null for synthetic), "eval_samples", "eval_every", "lr", "momentum", "seed",
  "target_accuracy" (or null), "max_iterations" (or null), "iterations_run" (every training
  iteration run, warm-up included; "iterations" is then the timed ones run),
  "evals": [{"iter" (training iterations completed), "samples" (global samples trained:
  iter x global_batch), "epoch" (samples / training-set size; null for synthetic),
  "train_time_s" (the training clock above), "loss" (null if not finite), "accuracy",
  "pause_s" (rank 0: first barrier entered to the end of the pause)}], "time_to_target_s"
  (train_time_s of the first evaluation with accuracy >= target; null when not reached),
  "samples_to_target" (its samples, or null), "target_reached" (bool), "stopped" ("target",
  "max_iterations", "iterations" or "diverged": a non-finite evaluation loss stops the run).
  "summary": {"mean_iteration_s", "median_iteration_s", "p10_iteration_s", "p90_iteration_s",
              "per_rank": [{"rank", "batch", "slowdown", "mean_compute_s", "median_compute_s",
                            "mean_forward_s", "mean_backward_s", "mean_update_s",
                            "mean_comm_tail_s", "mean_allreduce_s"}],
              "compute_spread": (max - min) / mean of the ranks' median compute_s},
  "rows": [per rank and iteration, warm-up included, the fields below]}
  Row fields (seconds): rank, iter (0-based, warm-up first), warmup (bool), batch, slowdown,
    start_s (from the earliest start of any rank), slow_s (step 1: extra passes or sleep),
    forward_s (zero_grad + forward + loss), backward_s (until every bucket is reduced),
    update_s (optimizer.step, and --local-period's model average), iteration_s (start to the end of the update),
    compute_s (start to the last bucket ready: the rank's own computing, slowdown included),
    comm_tail_s (last bucket ready to the end of backward: the all-reduce not hidden by the
    backward, including the wait for the other ranks), allreduce_s (sum over buckets of hook
    call to all-reduce completion), buckets, loss (the rank's mean loss, unscaled).
  mean_iteration_s = (latest end of the last iteration - earliest start of the first timed
  iteration - evaluation pauses between them) / iterations; per-iteration times are
  end-to-end: iteration i lasts from the latest end of iteration i-1 over the ranks (or, right
  after an evaluation, the earliest start of iteration i) to the latest end of iteration i.
  The summary is null when no timed iteration ran (a target met during the warm-up).
  CSV: the rows, with a header line.
Exit status: 0 written; 1 a rank failed; 2 bad arguments.
"""
import argparse
import contextlib
import csv
import datetime
import json
import math
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import hetsim_profile as hp  # noqa: E402  (the same models as the profiler)


def build_parser():
    p = hp._Parser(prog="ddp_train.py", formatter_class=argparse.RawDescriptionHelpFormatter,
                   description="Real PyTorch DDP training (gloo) with per-rank batches and "
                   "slowdowns, timed per iteration and rank. See the header of this file.")
    p.add_argument("--model", required=True, help="as tools/hetsim_profile.py --model")
    p.add_argument("--input", help="input dimensions per sample (as the profiler)")
    p.add_argument("--classes", type=hp._positive(int))
    p.add_argument("--batches", required=True, help="per-rank batch sizes, one per rank: 64,64 "
                   "or LBB's 86,42")
    p.add_argument("--iterations", type=hp._positive(int), help="timed (50; not with "
                   "--target-accuracy)")
    p.add_argument("--warmup", type=hp._nonneg_int, help="iterations left out of the summary "
                   "(5; 0 with --eval-every); they still train")
    p.add_argument("--slowdown", action="append", default=[], metavar="RANK:F",
                   help="rank RANK computes F times as long (repeatable; F >= 1)")
    p.add_argument("--slow-mode", choices=("repeat", "sleep"), default="repeat",
                   help="repeat: F-1 extra forward+backward passes (F an integer; default); "
                   "sleep: sleep (F-1) x the previous iteration's compute")
    p.add_argument("--threads", type=hp._positive(int), default=1, help="per rank (1)")
    p.add_argument("--pin", choices=("auto", "none"), default="auto",
                   help="pin rank r to its own --threads CPUs when there are enough (auto)")
    p.add_argument("--lr", type=hp._positive(float), default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--bucket-cap-mb", type=hp._positive(float), default=25.0,
                   help="DDP's bucket size (25, DDP's default)")
    p.add_argument("--no-hook", action="store_true", help="DDP's built-in all-reduce, no split")
    p.add_argument("--local-period", type=hp._positive(int), metavar="T",
                   help="local SGD: no DDP; PyTorch's PeriodicModelAverager averages the ranks' "
                   "models after every T iterations (equal batches; --eval-every a multiple of T)")
    p.add_argument("--seed", type=int, default=1, help="weights (all ranks start from rank 0's) "
                   "and data order (1)")
    p.add_argument("--data", default="synthetic", metavar="synthetic|fashion-mnist[:DIR]",
                   help="synthetic (default: random batches, timing only) or Fashion-MNIST "
                   "(default DIR " + hp.FASHION_MNIST_DIR + "): a random permutation per epoch, "
                   "shared by the ranks, in global batches split by --batches")
    p.add_argument("--eval-samples", type=hp._positive(int), default=2000,
                   help="evaluation samples: the first of the test set (2000)")
    p.add_argument("--eval-every", type=hp._nonneg_int, default=0, metavar="K",
                   help="evaluate on rank 0 before training and every K iterations, the ranks "
                   "paused and the pause left out of the training clock (0: never; default)")
    p.add_argument("--target-accuracy", type=float, metavar="A",
                   help="train until an evaluation reaches accuracy A (0 < A <= 1; needs "
                   "--eval-every and --data fashion-mnist) and report time_to_target_s")
    p.add_argument("--max-iterations", type=hp._positive(int), metavar="M",
                   help="with --target-accuracy: give up after M iterations (20000)")
    p.add_argument("--out", required=True, help="FILE.json or FILE.csv")
    p.add_argument("--quiet", action="store_true")
    return p


def check_args(a):
    a.batch_list = hp.parse_int_list(a.batches, "--batches", repeats=True)
    n = len(a.batch_list)
    if n < 1:
        raise hp.UsageError("--batches: at least one rank")
    a.slow = [1.0] * n
    for s in a.slowdown:
        r, sep, f = s.partition(":")
        try:
            r, f = int(r), float(f)
        except ValueError:
            raise hp.UsageError(f"--slowdown: expected RANK:FACTOR like 1:2, got \"{s}\"")
        if not sep or not (0 <= r < n) or not (f >= 1) or not math.isfinite(f):
            raise hp.UsageError(f"--slowdown {s}: rank in [0, {n}) and a factor >= 1 expected")
        if a.slow_mode == "repeat" and f != int(f):
            raise hp.UsageError(f"--slowdown {s}: --slow-mode repeat takes whole factors "
                                "(use --slow-mode sleep for {f})")
        a.slow[r] = f
    a.input_dims = hp.parse_dims(a.input, "--input") if a.input else None
    if a.data == "synthetic":
        a.data_kind, a.data_dir = "synthetic", None
    elif a.data == "fashion-mnist" or a.data.startswith("fashion-mnist:"):
        a.data_kind = "fashion-mnist"
        a.data_dir = a.data.split(":", 1)[1] if ":" in a.data else hp.FASHION_MNIST_DIR
        if not a.data_dir:
            raise hp.UsageError("--data fashion-mnist:DIR: DIR is empty")
        missing = [f for f in FASHION_MNIST_FILES
                   if not os.path.isfile(os.path.join(a.data_dir, f))]
        if missing:
            raise hp.UsageError(f"--data {a.data}: {a.data_dir} lacks {', '.join(missing)} "
                                "(Debian: apt-get install dataset-fashion-mnist)")
    else:
        raise hp.UsageError(f"--data: expected synthetic or fashion-mnist[:DIR], got \"{a.data}\"")
    if a.target_accuracy is not None:
        if not (0 < a.target_accuracy <= 1):
            raise hp.UsageError(f"--target-accuracy: expected 0 < A <= 1, got {a.target_accuracy}")
        if not a.eval_every:
            raise hp.UsageError("--target-accuracy needs --eval-every K > 0")
        if a.data_kind != "fashion-mnist":
            raise hp.UsageError("--target-accuracy needs real data (--data fashion-mnist); "
                                "synthetic labels are random")
        if a.iterations is not None:
            raise hp.UsageError("--iterations: a --target-accuracy run trains until the target "
                                "(bound it with --max-iterations)")
        if a.max_iterations is None:
            a.max_iterations = 20000
    elif a.max_iterations is not None:
        raise hp.UsageError("--max-iterations bounds a --target-accuracy run (use --iterations)")
    if a.iterations is None:
        a.iterations = 50
    if a.warmup is None:
        a.warmup = 0 if a.eval_every else 5
    if a.target_accuracy is not None and a.warmup >= a.max_iterations:
        raise hp.UsageError(f"--warmup {a.warmup}: no timed iteration within --max-iterations "
                            f"{a.max_iterations}")
    a.extended = a.data_kind != "synthetic" or a.eval_every > 0
    if a.extended and a.out.endswith(".csv"):
        raise hp.UsageError(f"--out {a.out}: --data and --eval-every results need a .json file")
    if a.local_period is not None:
        if len(set(a.batch_list)) > 1:
            raise hp.UsageError("--local-period: the ranks' batches must be equal (the model "
                                "average weighs the ranks equally)")
        if a.eval_every % a.local_period:
            raise hp.UsageError(f"--local-period {a.local_period}: --eval-every must be a multiple "
                                "of it, so that every evaluation sees an averaged model")
        a.no_hook = True
    if not (0 <= a.momentum < 1):
        raise hp.UsageError(f"--momentum: expected a number in [0, 1), got {a.momentum}")
    d = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(d) or not os.access(d, os.W_OK):
        raise hp.UsageError(f"--out {a.out}: folder {d} does not exist or is not writable")
    if not a.out.endswith((".json", ".csv")):
        raise hp.UsageError(f"--out {a.out}: expected a .json or .csv file")


FASHION_MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                       "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def check_data_model(a, ms):
    """The model's input against --data (exit 2 before any rank starts)."""
    if a.data_kind == "fashion-mnist" and tuple(ms.input) not in ((1, 28, 28), (784,)):
        raise hp.UsageError(f"--data fashion-mnist: 1x28x28 images (or 784 values), the model "
                            f"takes {ms.input_str()} (give --input 1x28x28 or 784)")


def load_data(a, ms, classes, out_shape):
    """(x_train, y_train, x_eval, y_eval) on the CPU; None for the training set with synthetic
    data. Fashion-MNIST comes from the profiler's curve_data (the same files, normalisation and
    evaluation samples as its curves)."""
    import types
    import torch
    if a.data_kind == "fashion-mnist":
        if len(out_shape) != 2 or out_shape[1] < 10:
            raise RuntimeError(f"--data fashion-mnist: 10 classes, the model's output has shape "
                               f"{tuple(out_shape)} (give --classes 10)")
        ns = types.SimpleNamespace(curve_data="fashion-mnist:" + a.data_dir,
                                   curve_eval_samples=a.eval_samples, seed=a.seed)
        return hp.curve_data(ns, ms)
    g = torch.Generator().manual_seed(a.seed * 7919 + 104729)
    n = a.eval_samples
    return (None, None, torch.randn((n,) + tuple(ms.input), generator=g),
            torch.randint(0, classes, (n,) + tuple(out_shape[2:]), generator=g))


def evaluate(net, xe, ye):
    """Mean cross-entropy and argmax accuracy over (xe, ye), as hetsim_profile's run_curves."""
    import torch
    import torch.nn.functional as F
    net.eval()
    loss_sum, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for i in range(0, len(xe), 512):
            out = hp.logits_of(net(xe[i:i + 512]))
            yy = ye[i:i + 512]
            loss_sum += float(F.cross_entropy(out, yy, reduction="sum"))
            correct += int((out.argmax(1) == yy).sum())
            count += yy.numel()
    net.train()
    return loss_sum / count, correct / count


class HookState:
    def __init__(self, world):
        self.world, self.ready, self.done = world, [], []


def timing_hook(state, bucket):
    """DDP's default all-reduce (divide by the world size, sum, asynchronously), recording when
    the bucket became ready and when its all-reduce completed."""
    import torch.distributed as dist
    state.ready.append(time.perf_counter())
    t = bucket.buffer()
    t.div_(state.world)
    fut = dist.all_reduce(t, async_op=True).get_future()

    def done(f):
        state.done.append(time.perf_counter())
        return f.value()[0]
    return fut.then(done)


def train_rank(a, rank, world, cpus, init_method):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    hp.setup_process(a.threads, cpus)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    ms = hp.ModelSpec(a.model, a.input_dims, a.classes, None, None)
    torch.manual_seed(a.seed)
    net = ms.build()
    out_shape = hp.probe(ms, net, torch.device("cpu"))
    classes = out_shape[1]
    params, grad_bytes, _ = hp.model_facts(ms, net)
    state = HookState(world)
    averager = None
    if a.local_period is None:
        model = DDP(net, bucket_cap_mb=a.bucket_cap_mb)
        if not a.no_hook:
            model.register_comm_hook(state, timing_hook)
        no_sync = model.no_sync
    else:  # local SGD: each rank's own steps, PyTorch's averager every local_period of them
        from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
        model, no_sync = net, contextlib.nullcontext
        averager = PeriodicModelAverager(period=a.local_period, warmup_steps=a.local_period - 1)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    b, f = a.batch_list[rank], a.slow[rank]
    scale = world * b / sum(a.batch_list) if averager is None else 1.0
    if a.extended:
        xt, yt, xe, ye = load_data(a, ms, classes, out_shape)
    else:
        xt = None
    if xt is None:
        g = torch.Generator().manual_seed(a.seed * 7919 + rank)
        data = [(torch.randn((b,) + tuple(ms.input), generator=g),
                 torch.randint(0, classes, (b,) + tuple(out_shape[2:]), generator=g))
                for _ in range(4)]
    else:  # one permutation for all ranks, global batches of B, rank r's slice at offset
        big_b, offset, n_train = sum(a.batch_list), sum(a.batch_list[:rank]), len(xt)
        if big_b > n_train:
            raise RuntimeError(f"--batches: global batch {big_b} > {n_train} training samples")
        perm_g = torch.Generator().manual_seed(a.seed + 3)  # as hetsim_profile's run_curves
        perm, pos = torch.randperm(n_train, generator=perm_g), 0
    target = a.target_accuracy
    n_total = a.max_iterations if target is not None else a.warmup + a.iterations
    evals, stopped = [], ("max_iterations" if target is not None else "iterations")
    rows, last_compute = [], None
    pc = time.perf_counter
    dist.barrier()
    it = 0
    while True:
        if a.eval_every and it % a.eval_every == 0:
            t_a = pc()
            dist.barrier()
            flag = torch.zeros(3, dtype=torch.float64)
            if rank == 0:
                loss_e, acc_e = evaluate(net, xe, ye)
                stop = 0.0
                if not math.isfinite(loss_e):
                    stop = 2.0
                elif target is not None and acc_e >= target:
                    stop = 1.0
                flag = torch.tensor([stop, loss_e, acc_e], dtype=torch.float64)
            dist.broadcast(flag, 0)
            stop = int(flag[0])
            if not stop:
                dist.barrier()
            t_b = pc()
            if rank == 0:
                loss_e, acc_e = float(flag[1]), float(flag[2])
                evals.append({"iter": it, "loss": loss_e if math.isfinite(loss_e) else None,
                              "accuracy": acc_e, "pause_s": t_b - t_a})
                if not a.quiet:
                    print(f"ddp_train: iteration {it}, {it * sum(a.batch_list)} samples: loss "
                          f"{loss_e:.4f}, accuracy {acc_e:.4f}", file=sys.stderr, flush=True)
            if stop:
                stopped = "target" if stop == 1 else "diverged"
                break
        if it >= n_total:
            break
        if xt is None:
            x, y = data[it % len(data)]
        else:
            if pos + big_b > n_train:
                perm, pos = torch.randperm(n_train, generator=perm_g), 0
            idx = perm[pos + offset:pos + offset + b]
            pos += big_b
            x, y = xt[idx], yt[idx]
        state.ready.clear()
        state.done.clear()
        t0 = pc()
        if f > 1 and a.slow_mode == "repeat":
            for _ in range(int(f) - 1):
                with no_sync():
                    F.cross_entropy(hp.logits_of(model(x)), y).backward()
            opt.zero_grad(set_to_none=True)
        elif f > 1 and last_compute is not None:
            time.sleep((f - 1) * last_compute)
        ts = pc()
        opt.zero_grad(set_to_none=True)
        raw = F.cross_entropy(hp.logits_of(model(x)), y)
        loss = raw * scale
        t1 = pc()
        loss.backward()
        t2 = pc()
        opt.step()
        if averager is not None:
            averager.average_parameters(net.parameters())
        t3 = pc()
        ready = max(state.ready) if state.ready else None
        row = {"rank": rank, "iter": it, "warmup": it < a.warmup, "batch": b, "slowdown": f,
               "start_s": t0, "slow_s": ts - t0, "forward_s": t1 - ts, "backward_s": t2 - t1,
               "update_s": t3 - t2, "iteration_s": t3 - t0,
               "compute_s": (ready - t0) if ready is not None else None,
               "comm_tail_s": (t2 - ready) if ready is not None else None,
               "allreduce_s": (sum(d - r for r, d in zip(sorted(state.ready), sorted(state.done)))
                               if state.ready and len(state.done) == len(state.ready) else None),
               "buckets": len(state.ready) if not a.no_hook else None,
               "loss": float(raw), "end_s": t3}
        last_compute = (ready - ts) if ready is not None else (t2 - ts)
        rows.append(row)
        it += 1
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "cpus": cpus, "rows": rows})
    if rank == 0:
        run = None
        if a.extended:
            run = {"evals": evals, "stopped": stopped, "iterations_run": it,
                   "n_train": len(xt) if xt is not None else None}
        write_output(a, ms, params, grad_bytes, gathered, world, run)
    dist.barrier()
    # No teardown: destroying the DDP reducer's gloo group joins gloo's worker threads while this
    # thread holds the GIL, and a worker freeing a tensor the comm hook touched in Python waits
    # for the GIL (a deadlock seen with torch 1.13). The caller ends the process with os._exit.
    return 0


def _q(xs, q):
    return hp.quantile(sorted(xs), q) if xs else None


def write_output(a, ms, params, grad_bytes, gathered, world, run=None):
    """run: None (no --data/--eval-every: the output as it always was) or {"evals" (rank 0's,
    iter/loss/accuracy/pause_s), "stopped", "iterations_run", "n_train"}."""
    import torch
    rows = [r for g in sorted(gathered, key=lambda g: g["rank"]) for r in g["rows"]]
    t_min = min((r["start_s"] for r in rows), default=0.0)
    for r in rows:
        r["start_s"] -= t_min
        r["end_s"] -= t_min
        if not math.isfinite(r["loss"]):
            r["loss"] = None
    timed = [r for r in rows if not r["warmup"]]
    n_it = run["iterations_run"] if run else a.warmup + a.iterations
    n_timed = max(0, n_it - a.warmup)
    starts, ends = [math.inf] * n_it, [-math.inf] * n_it  # earliest start, latest end over ranks
    for r in rows:
        i = r["iter"]
        starts[i] = min(starts[i], r["start_s"])
        ends[i] = max(ends[i], r["end_s"])
    evals = run["evals"] if run else []
    # training segments: the iterations between evaluations (first, last), the ranks paused between
    bounds = sorted({0} | {e["iter"] for e in evals if e["iter"] < n_it}) if n_it else []
    segments = [(f, (bounds[k + 1] if k + 1 < len(bounds) else n_it) - 1)
                for k, f in enumerate(bounds)]
    busy = 0.0  # training time within the timed iterations
    for f, last in segments:
        if max(f, a.warmup) <= last:
            busy += ends[last] - starts[max(f, a.warmup)]
    for e in evals:
        e["train_time_s"] = sum((ends[last] - starts[f] for f, last in segments
                                 if last < e["iter"]), 0.0)
    bset = set(bounds)
    per_it = [ends[i] - (starts[i] if i in bset else ends[i - 1]) for i in range(a.warmup, n_it)]
    mean_it = busy / n_timed if n_timed else None
    per_rank = []
    for rank in range(world if n_timed else 0):
        mine = [r for r in timed if r["rank"] == rank]

        def mean(k):
            v = [r[k] for r in mine if r[k] is not None]
            return sum(v) / len(v) if v else None
        comp = [r["compute_s"] if r["compute_s"] is not None else r["slow_s"] + r["forward_s"] + r["backward_s"]
                for r in mine]
        per_rank.append({"rank": rank, "batch": a.batch_list[rank], "slowdown": a.slow[rank],
                         "mean_compute_s": sum(comp) / len(comp), "median_compute_s": _q(comp, 0.5),
                         "mean_forward_s": mean("forward_s"), "mean_backward_s": mean("backward_s"),
                         "mean_update_s": mean("update_s"), "mean_comm_tail_s": mean("comm_tail_s"),
                         "mean_allreduce_s": mean("allreduce_s")})
    meds = [p["median_compute_s"] for p in per_rank]
    summary = None if not n_timed else {
               "mean_iteration_s": mean_it, "median_iteration_s": _q(per_it, 0.5),
               "p10_iteration_s": _q(per_it, 0.1), "p90_iteration_s": _q(per_it, 0.9),
               "per_rank": per_rank,
               "compute_spread": (max(meds) - min(meds)) / (sum(meds) / len(meds))}
    fields = ["rank", "iter", "warmup", "batch", "slowdown", "start_s", "slow_s", "forward_s",
              "backward_s", "update_s", "iteration_s", "compute_s", "comm_tail_s", "allreduce_s",
              "buckets", "loss"]
    for r in rows:
        del r["end_s"]
    if a.out.endswith(".csv"):
        def write(f):
            w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
    else:
        doc = {"format": "hetsim-ddp-bench", "version": 1,
               "model": {"name": ms.name, "origin": ms.spec, "params": params,
                         "grad_bytes": grad_bytes, "input": ms.input_str()},
               "world_size": world, "batches": a.batch_list, "global_batch": sum(a.batch_list),
               "slowdowns": a.slow, "slow_mode": a.slow_mode, "iterations": a.iterations,
               "warmup": a.warmup, "threads": a.threads,
               "cpus": [g["cpus"] for g in sorted(gathered, key=lambda g: g["rank"])],
               "backend": "gloo", "comm_hook": not a.no_hook, "bucket_cap_mb": a.bucket_cap_mb,
               "local_period": a.local_period,
               "torch_version": torch.__version__, "host": socket.gethostname(),
               "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "command": [os.path.basename(sys.argv[0])] + sys.argv[1:]}
        if run:
            doc["iterations"] = n_timed
            b_glob, tgt = sum(a.batch_list), a.target_accuracy
            out_evals = [{"iter": e["iter"], "samples": e["iter"] * b_glob,
                          "epoch": (round(e["iter"] * b_glob / run["n_train"], 6)
                                    if run["n_train"] else None),
                          "train_time_s": e["train_time_s"], "loss": e["loss"],
                          "accuracy": e["accuracy"], "pause_s": e["pause_s"]} for e in evals]
            hit = next((e for e in out_evals if tgt is not None and e["accuracy"] >= tgt), None)
            doc.update({"data": a.data_kind, "data_dir": a.data_dir,
                        "eval_samples": a.eval_samples, "eval_every": a.eval_every, "lr": a.lr,
                        "momentum": a.momentum, "seed": a.seed, "target_accuracy": tgt,
                        "max_iterations": a.max_iterations, "iterations_run": n_it,
                        "stopped": run["stopped"], "target_reached": hit is not None,
                        "time_to_target_s": hit["train_time_s"] if hit else None,
                        "samples_to_target": hit["samples"] if hit else None,
                        "evals": out_evals})
        doc.update({"summary": summary, "rows": rows})

        def write(f):
            json.dump(doc, f, indent=1, allow_nan=False)
            f.write("\n")
    hp.write_atomic(a.out, write)
    if not a.quiet and run:
        tt = doc["time_to_target_s"]
        print(f"ddp_train: {n_it} iterations ({run['stopped']}), {len(evals)} evaluations"
              + (f", last accuracy {evals[-1]['accuracy']:.4f} at {evals[-1]['train_time_s']:.3f} s"
                 if evals else "")
              + (f"; time to target {a.target_accuracy:g}: {tt:.3f} s" if tt is not None
                 else "; target not reached" if a.target_accuracy is not None else ""),
              file=sys.stderr)
    if not a.quiet and summary:
        pr = " ".join(f"r{p['rank']}(b={p['batch']},f={p['slowdown']:g}): compute "
                      f"{p['median_compute_s'] * 1e3:.2f} ms" for p in per_rank)
        print(f"ddp_train: {ms.name} x{world}: mean iteration {mean_it * 1e3:.3f} ms, median "
              f"{summary['median_iteration_s'] * 1e3:.3f} ms; {pr}; wrote {a.out}", file=sys.stderr)


def _hard_exit(code, queue=None):
    """Ends the process without tearing down torch.distributed (see train_rank)."""
    if queue is not None:
        queue.close()
        queue.join_thread()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _child(a, rank, world, cpus, init_method, queue):
    try:
        train_rank(a, rank, world, cpus, init_method)
        queue.put((rank, None))
        code = 0
    except BaseException as e:
        queue.put((rank, f"{type(e).__name__}: {e}"))
        code = 1
    _hard_exit(code, queue)


def main(argv=None):
    a = build_parser().parse_args(argv)
    try:
        check_args(a)
        ms = hp.ModelSpec(a.model, a.input_dims, a.classes, None, None)  # bad model: exit 2 here
        check_data_model(a, ms)
        del ms
    except hp.UsageError as e:
        print(f"ddp_train.py: {e}", file=sys.stderr)
        return 2
    hp.limit_blas_pool(a.threads)  # before torch loads OpenBLAS, here and in the spawned ranks
    import torch  # noqa: F401
    world = len(a.batch_list)
    tr = hp.torchrun_env()
    cpus_plan = hp.plan_cpus(world, a.threads, a.pin, _cpu())
    if tr:
        rank, w, _ = tr
        if w != world:
            print(f"ddp_train.py: --batches lists {world} ranks, WORLD_SIZE is {w}", file=sys.stderr)
            return 2
        try:
            code = train_rank(a, rank, world, cpus_plan[rank], "env://")
        except Exception as e:
            print(f"ddp_train.py: rank {rank}: {type(e).__name__}: {e}", file=sys.stderr)
            code = 1
        _hard_exit(code)
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    tmpdir = tempfile.mkdtemp(prefix="hetsim-ddp-")
    init = "file://" + os.path.join(tmpdir, "store")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(a, r, world, cpus_plan[r], init, queue), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    errors, finished = [], 0
    try:
        while finished < world:
            try:
                rank, err = queue.get(timeout=5)
            except Exception:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    errors.append(f"a rank died (exit status {dead[0].exitcode})")
                    break
                continue
            finished += 1
            if err:
                errors.append(f"rank {rank}: {err}")
                break
    finally:
        for p in procs:
            if errors and p.is_alive():
                p.terminate()
            p.join(timeout=60)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(tmpdir, "store"))
        with contextlib.suppress(OSError):
            os.rmdir(tmpdir)
    if errors:
        print("ddp_train.py: " + "; ".join(errors), file=sys.stderr)
        return 1
    return 0


def _cpu():
    import torch
    return torch.device("cpu")


if __name__ == "__main__":
    sys.exit(main())
