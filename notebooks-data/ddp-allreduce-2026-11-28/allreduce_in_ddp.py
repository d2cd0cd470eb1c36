#!/usr/bin/env python3
"""What DDP's all-reduce cost in the passes of a bench/bench_ddp.sh folder, per case, from the
rows of bench/ddp_train.py: per timed iteration, the rank whose last gradient bucket was ready
last (start_s + compute_s) and its allreduce_s (hook call to completion: it waits for no one),
pooled over the passes; the arrival skew between the ranks; and what the profile of each pass
measured: the sweep's all-reduce at the gradient's size (after a barrier) and, where the profile
has one, the allreduce_step entry (--comm-step, its mean). Times in ms.

    python3 notebooks-data/ddp-allreduce-2026-11-28/allreduce_in_ddp.py DIR [DIR...]
"""
import gzip
import json
import os
import statistics as st
import sys


def load(path):
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        return json.load(gzip.open(path + ".gz", "rt"))
    return json.load(open(path))


def passes(folder):
    k = 1
    while os.path.isdir(os.path.join(folder, f"pass{k}")):
        yield os.path.join(folder, f"pass{k}")
        k += 1


def q(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


for folder in sys.argv[1:]:
    cases, sweep, step = {}, [], []
    for p in passes(folder):
        prof = load(os.path.join(p, "profile.json"))
        g = prof["model"]["grad_bytes"]
        for e in prof.get("comm", []):
            if e["op"] == "allreduce" and e["bytes"] == g:
                sweep.append(e["median_s"] * 1e3)
            if e["op"] == "allreduce_step":
                step.append(e["mean_s"] * 1e3)
        for case in ("homo", "slow", "lbb", "lbb_smooth", "lbb_static"):
            f = os.path.join(p, f"{case}.json")
            if not (os.path.exists(f) or os.path.exists(f + ".gz")):
                continue
            d = load(f)
            by = {}
            for r in d["rows"]:
                if not r["warmup"] and r.get("allreduce_s") is not None:
                    by.setdefault(r["iter"], {})[r["rank"]] = r
            c = cases.setdefault(case, {"ar": [], "skew": []})
            for rr in by.values():
                ready = {k: v["start_s"] + v["compute_s"] for k, v in rr.items()}
                last = max(ready, key=ready.get)
                c["ar"].append(rr[last]["allreduce_s"] * 1e3)
                c["skew"].append((max(ready.values()) - min(ready.values())) * 1e3)
    n = len(list(passes(folder)))
    print(f"{folder}: {n} passes")
    print(f"  profile's sweep all-reduce at the gradient's size (median per pass): median "
          f"{st.median(sweep):.2f}, range {min(sweep):.2f}-{max(sweep):.2f}" if sweep else
          "  no sweep entry at the gradient's size")
    if step:
        print(f"  profile's allreduce_step (mean per pass): median {st.median(step):.2f}, "
              f"range {min(step):.2f}-{max(step):.2f}")
    print("  case        iterations  last rank's all-reduce: mean  median  p10   p90   "
          "share > 1 ms | arrival skew median")
    for case, c in cases.items():
        a = c["ar"]
        print(f"  {case:<11} {len(a):>10}  {st.mean(a):>30.2f}  {st.median(a):>6.2f}  "
              f"{q(a, 0.1):>4.2f}  {q(a, 0.9):>4.2f}  {sum(x > 1 for x in a) / len(a):>12.2f} | "
              f"{st.median(c['skew']):.2f}")
