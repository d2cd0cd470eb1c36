#!/usr/bin/env python3
"""Per pass of a bench_ddp.sh folder, the slowed case's rank 1 (SLOW_MODE repeat): its extra
forward+backward (under no_sync, while rank 0 computes beside it) against its main pass (after
rank 0 has finished and waits in the all-reduce), medians over the timed iterations, in ms; and
its two passes against twice the homogeneous case's rank compute.
    python3 notebooks-data/ddp-cpu-2026-11-28-G/slowed_rank.py DIR"""
import gzip, json, os, statistics as st, sys


def load(path):
    return json.load(gzip.open(path + ".gz", "rt")) if os.path.exists(path + ".gz") else json.load(open(path))


d, k, ratios = sys.argv[1], 1, []
while os.path.isdir(f"{d}/pass{k}"):
    s = load(f"{d}/pass{k}/slow.json")
    h = load(f"{d}/pass{k}/homo.json")["summary"]["per_rank"]
    r1 = [r for r in s["rows"] if r["rank"] == 1 and not r["warmup"]]
    extra = st.median(r["slow_s"] for r in r1) * 1e3
    main = st.median(r["compute_s"] - r["slow_s"] for r in r1) * 1e3
    both = st.median(r["compute_s"] for r in r1) * 1e3
    homo = sum(r["median_compute_s"] for r in h) / len(h) * 1e3
    ratios.append(extra / main)
    print(f"pass {k}: rank 1 extra pass {extra:.1f}, main pass {main:.1f} (extra / main {extra / main:.2f}); "
          f"both {both:.1f} against 2 x homogeneous rank compute {2 * homo:.1f} ({both / (2 * homo):.2f})")
    k += 1
print(f"median extra / main: {st.median(ratios):.3f}")
