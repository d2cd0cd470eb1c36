#!/usr/bin/env python3
"""ddp_train.py: real PyTorch DistributedDataParallel training (gloo, N processes on this host, one
thread each, each pinned to its own CPU) with per-rank batch sizes and slowdowns, recording
per-iteration times per rank. It is the reference that hetsim's predictions are compared with
(issue 15, section 4); nothing in it comes from hetsim.

    python3 bench/ddp_train.py --model cnn --batches 64,64 --iterations 50 --out ddp.json
    python3 bench/ddp_train.py --model cnn --batches 64,64 --slowdown 1:2 --out slow.json
    python3 bench/ddp_train.py --model cnn --batches 86,42 --slowdown 1:2 --out lbb.json

Models: as tools/hetsim_profile.py (mlp, cnn, resnet18, vgg16, mobilenetv2 built in layer for
layer as hetsim's zoo, torchvision:NAME, module.path:factory with --input). Data: synthetic,
random fp32 inputs and random labels, four batches per rank made before training and cycled.
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

Timing (time.perf_counter, CLOCK_MONOTONIC, common to the processes of one host). A DDP comm hook
that does what DDP's default does (divide by N, all-reduce, async) records when each bucket is
ready (the backward produced all its gradients) and when its all-reduce completes (--no-hook
runs DDP's built-in all-reduce instead; then the split below is null).

Output (--out FILE.json, or FILE.csv for the per-iteration rows only), written by rank 0:
  JSON: {"format": "hetsim-ddp-bench", "version": 1, "model": {name, origin, params,
  grad_bytes, input}, "world_size", "batches": [b_r], "global_batch", "slowdowns": [f_r],
  "slow_mode", "iterations", "warmup", "threads", "cpus": [[cpu...] or null per rank],
  "backend": "gloo", "comm_hook": bool, "bucket_cap_mb", "torch_version", "host",
  "created_at",
  "summary": {"mean_iteration_s", "median_iteration_s", "p10_iteration_s", "p90_iteration_s",
              "per_rank": [{"rank", "batch", "slowdown", "mean_compute_s", "median_compute_s",
                            "mean_forward_s", "mean_backward_s", "mean_update_s",
                            "mean_comm_tail_s", "mean_allreduce_s"}],
              "compute_spread": (max - min) / mean of the ranks' median compute_s},
  "rows": [per rank and iteration, warm-up included, the fields below]}
  Row fields (seconds): rank, iter (0-based, warm-up first), warmup (bool), batch, slowdown,
    start_s (from the earliest start of any rank), slow_s (step 1: extra passes or sleep),
    forward_s (zero_grad + forward + loss), backward_s (until every bucket is reduced),
    update_s (optimizer.step), iteration_s (start to the end of the update),
    compute_s (start to the last bucket ready: the rank's own computing, slowdown included),
    comm_tail_s (last bucket ready to the end of backward: the all-reduce not hidden by the
    backward, including the wait for the other ranks), allreduce_s (sum over buckets of hook
    call to all-reduce completion), buckets, loss (the rank's mean loss, unscaled).
  mean_iteration_s = (latest end of the last iteration - earliest start of the first timed
  iteration) / iterations; per-iteration times are end-to-end: iteration i lasts from the
  latest end of iteration i-1 over the ranks to the latest end of iteration i.
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
    p.add_argument("--iterations", type=hp._positive(int), default=50, help="timed (50)")
    p.add_argument("--warmup", type=hp._nonneg_int, default=5, help="untimed iterations (5)")
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
    p.add_argument("--seed", type=int, default=1)
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
    if not (0 <= a.momentum < 1):
        raise hp.UsageError(f"--momentum: expected a number in [0, 1), got {a.momentum}")
    d = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(d) or not os.access(d, os.W_OK):
        raise hp.UsageError(f"--out {a.out}: folder {d} does not exist or is not writable")
    if not a.out.endswith((".json", ".csv")):
        raise hp.UsageError(f"--out {a.out}: expected a .json or .csv file")


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
    model = DDP(net, bucket_cap_mb=a.bucket_cap_mb)
    state = HookState(world)
    if not a.no_hook:
        model.register_comm_hook(state, timing_hook)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    b, f = a.batch_list[rank], a.slow[rank]
    scale = world * b / sum(a.batch_list)
    g = torch.Generator().manual_seed(a.seed * 7919 + rank)
    data = [(torch.randn((b,) + tuple(ms.input), generator=g),
             torch.randint(0, classes, (b,) + tuple(out_shape[2:]), generator=g)) for _ in range(4)]
    rows, last_compute = [], None
    pc = time.perf_counter
    dist.barrier()
    for it in range(a.warmup + a.iterations):
        x, y = data[it % len(data)]
        state.ready.clear()
        state.done.clear()
        t0 = pc()
        if f > 1 and a.slow_mode == "repeat":
            for _ in range(int(f) - 1):
                with model.no_sync():
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
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "cpus": cpus, "rows": rows})
    if rank == 0:
        write_output(a, ms, params, grad_bytes, gathered, world)
    dist.barrier()
    # No teardown: destroying the DDP reducer's gloo group joins gloo's worker threads while this
    # thread holds the GIL, and a worker freeing a tensor the comm hook touched in Python waits
    # for the GIL (a deadlock seen with torch 1.13). The caller ends the process with os._exit.
    return 0


def _q(xs, q):
    return hp.quantile(sorted(xs), q) if xs else None


def write_output(a, ms, params, grad_bytes, gathered, world):
    import torch
    rows = [r for g in sorted(gathered, key=lambda g: g["rank"]) for r in g["rows"]]
    t_min = min(r["start_s"] for r in rows)
    for r in rows:
        r["start_s"] -= t_min
        r["end_s"] -= t_min
    timed = [r for r in rows if not r["warmup"]]
    n_it = a.warmup + a.iterations
    ends = [max(r["end_s"] for r in rows if r["iter"] == i) for i in range(n_it)]
    first = min(r["start_s"] for r in timed)
    mean_it = (ends[-1] - first) / a.iterations
    per_it = [ends[i] - (ends[i - 1] if i > 0 else first) for i in range(a.warmup, n_it)]
    if a.warmup == 0:
        per_it[0] = ends[0] - first
    per_rank = []
    for rank in range(world):
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
    summary = {"mean_iteration_s": mean_it, "median_iteration_s": _q(per_it, 0.5),
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
               "torch_version": torch.__version__, "host": socket.gethostname(),
               "created_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "command": [os.path.basename(sys.argv[0])] + sys.argv[1:],
               "summary": summary, "rows": rows}

        def write(f):
            json.dump(doc, f, indent=1, allow_nan=False)
            f.write("\n")
    hp.write_atomic(a.out, write)
    if not a.quiet:
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
