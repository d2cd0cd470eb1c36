#!/usr/bin/env python3
"""cpu_noise.py: how steady a training step is on this machine's CPU, for reading the DDP check
(bench/bench_ddp.sh, docs/performance.md "Against PyTorch DDP"). Three probes, each timing the
zoo's model (tools/hetsim_profile.py's built-ins) one thread per process, each process pinned
to its own CPU, wall time (perf_counter) and the thread's CPU time (thread_time: blind to
waiting for a CPU the process was not given):

  processes B1,B2,...  fresh processes, one per batch size and round, rounds alternating the
                       order (--rounds, default 5): the spread of their medians is what one
                       profile point (one process per batch size) or one DDP rank (one process)
                       draws;
  partner A B1,B2      process 0 steps batch A continuously while process 1 cycles: idle,
                       B1 x 4 steps, B2 x 4 steps, ...; process 0's steps are classed by what
                       process 1 did throughout them (interleaved, so slow drift hits all classes
                       alike): does a rank's speed depend on its partner's batch?
  sleep A MS [B]       process 0 alternates 6 back-to-back steps of batch A with 6 steps each
                       after a MS ms sleep (how --slow-mode sleep runs a slowed DDP rank), with
                       process 1 idle or stepping batch B continuously.

    python3 bench/cpu_noise.py processes 128,169,192,256,343 --rounds 5
    python3 bench/cpu_noise.py partner 170 170,340 --seconds 30
    python3 bench/cpu_noise.py sleep 170 18 340 --seconds 20

Prints one line per class: the median over steps (or over processes), p25 and p75, count.
Needs /usr/bin/python3 with torch (Debian's python3-torch). --json FILE also writes the numbers.
"""
import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import hetsim_profile as hp  # noqa: E402  (the same models as the profiler and ddp_train.py)

hp.limit_blas_pool(1)  # one thread per process, OpenBLAS's pool included


def make_stepper(model, batches, cpu):
    import torch
    if hasattr(os, "sched_setaffinity") and cpu is not None and cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, [cpu])
    torch.set_num_threads(1)
    ms = hp.ModelSpec(model, None, None, None, None)
    net = ms.build()
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    lf = torch.nn.CrossEntropyLoss()
    data = {b: (torch.randn((b,) + tuple(ms.input)), torch.randint(0, ms.classes, (b,)))
            for b in set(batches) if b}

    def step(b):
        x, y = data[b]
        opt.zero_grad(set_to_none=True)
        lf(hp.logits_of(net(x)), y).backward()
        opt.step()
    for b in data:
        for _ in range(3):
            step(b)
    return step


def timed(step, b):
    w, c = time.perf_counter(), time.thread_time()
    step(b)
    return w, time.perf_counter(), time.thread_time() - c


def _one_process(model, b, steps, q):
    step = make_stepper(model, [b], 0)
    rec = [timed(step, b) for _ in range(steps)]
    q.put((statistics.median(e - s for s, e, _ in rec), statistics.median(c for _, _, c in rec)))


def _partner(rank, model, a, cycle, seconds, barrier, q):
    step = make_stepper(model, [a] + cycle, rank)
    barrier.wait()
    t0, rec = time.perf_counter(), []
    if rank == 0:
        while time.perf_counter() - t0 < seconds:
            s, e, c = timed(step, a)
            rec.append((s, e, c, a))
    else:
        while time.perf_counter() - t0 < seconds + 0.5:
            for b in cycle:
                if b == 0:
                    s = time.perf_counter()
                    time.sleep(0.15)
                    rec.append((s, time.perf_counter(), 0.0, 0))
                    continue
                for _ in range(4):
                    s, e, c = timed(step, b)
                    rec.append((s, e, c, b))
    q.put((rank, rec))


def _sleeper(rank, model, a, sleep_s, b, seconds, barrier, q):
    step = make_stepper(model, [a if rank == 0 else b], rank)
    barrier.wait()
    t0 = time.perf_counter()
    res = {"back_to_back": [], "after_sleep": []}
    while time.perf_counter() - t0 < seconds + (0.5 if rank else 0):
        if rank:
            timed(step, b)
            continue
        for mode in res:
            for _ in range(6):
                if mode == "after_sleep":
                    time.sleep(sleep_s)
                s, e, c = timed(step, a)
                res[mode].append((e - s, c))
    q.put((rank, res))


def quartiles(xs):
    xs = sorted(xs)
    n = len(xs)
    return {"median_ms": statistics.median(xs) * 1e3, "p25_ms": xs[n // 4] * 1e3,
            "p75_ms": xs[(3 * n) // 4] * 1e3, "count": n}


def show(label, wall, cpu):
    w, c = quartiles(wall), quartiles(cpu)
    print(f"{label:34} wall {w['median_ms']:7.2f} ms (p25 {w['p25_ms']:6.2f}, p75 {w['p75_ms']:6.2f})"
          f"   cpu {c['median_ms']:7.2f} ms (p25 {c['p25_ms']:6.2f}, p75 {c['p75_ms']:6.2f})   n {w['count']}",
          flush=True)
    return {"label": label, "wall": w, "cpu": c}


def run_group(ctx, target, args_of, n):
    barrier, q = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=target, args=args_of(r) + (barrier, q)) for r in range(n)]
    for p in procs:
        p.start()
    out = dict(q.get() for _ in procs)
    for p in procs:
        p.join()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("probe", choices=("processes", "partner", "sleep"))
    p.add_argument("args", nargs="+")
    p.add_argument("--model", default="cnn")
    p.add_argument("--rounds", type=int, default=5, help="processes: rounds (5)")
    p.add_argument("--steps", type=int, default=25, help="processes: timed steps each (25)")
    p.add_argument("--seconds", type=float, default=30.0, help="partner, sleep: seconds (30)")
    p.add_argument("--json", help="also write the numbers to this file")
    a = p.parse_args()
    ctx = mp.get_context("spawn")
    result = {"probe": a.probe, "args": a.args, "model": a.model, "classes": []}
    if a.probe == "processes":
        sizes = [int(x) for x in a.args[0].split(",")]
        per = {b: [] for b in sizes}
        for r in range(a.rounds):
            for b in (sizes if r % 2 == 0 else sizes[::-1]):
                q = ctx.Queue()
                pr = ctx.Process(target=_one_process, args=(a.model, b, a.steps, q))
                pr.start()
                per[b].append(q.get())
                pr.join()
        for b in sizes:
            c = show(f"batch {b}: {a.rounds} processes", [w for w, _ in per[b]], [c for _, c in per[b]])
            c["process_medians_ms"] = [w * 1e3 for w, _ in per[b]]
            med = [w for w, _ in per[b]]
            c["spread_max_over_min"] = max(med) / min(med)
            result["classes"].append(c)
            print(f"{'':34} process medians (ms): {' '.join(f'{w * 1e3:.1f}' for w in med)};"
                  f" slowest / fastest {max(med) / min(med):.2f}")
    elif a.probe == "partner":
        bA, cycle = int(a.args[0]), [0] + [int(x) for x in a.args[1].split(",")]
        out = run_group(ctx, _partner, lambda r: (r, a.model, bA, cycle, a.seconds), 2)
        classes = {}
        for s, e, c, _ in out[0]:
            cover = {}
            for bs, be, _, bb in out[1]:
                o = min(e, be) - max(s, bs)
                if o > 0:
                    cover[bb] = cover.get(bb, 0.0) + o
            for bb, o in cover.items():
                if o >= 0.98 * (e - s):
                    classes.setdefault(bb, []).append((e - s, c))
        for bb in sorted(classes):
            label = f"batch {bA} beside " + (f"batch {bb}" if bb else "an idle partner")
            result["classes"].append(show(label, [w for w, _ in classes[bb]], [c for _, c in classes[bb]]))
    else:
        bA, ms = int(a.args[0]), float(a.args[1])
        bB = int(a.args[2]) if len(a.args) > 2 else 0
        n = 2 if bB else 1
        out = run_group(ctx, _sleeper, lambda r: (r, a.model, bA, ms / 1e3, bB, a.seconds), n)
        for mode, xs in out[0].items():
            label = f"batch {bA} {mode.replace('_', ' ')}" + (f" (partner {bB})" if bB else "")
            result["classes"].append(show(label, [w for w, _ in xs], [c for _, c in xs]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
