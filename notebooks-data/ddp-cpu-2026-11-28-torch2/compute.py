#!/usr/bin/env python3
"""Per pass of a bench_ddp.sh folder: the profile's step median at the bench's batch (256) against
DDP's homogeneous ranks' median compute (start to the last bucket ready) and update, in ms.
    python3 notebooks-data/ddp-cpu-2026-11-28-torch2/compute.py DIR"""
import gzip, json, os, sys

d = sys.argv[1]
k = 1
while os.path.isdir(f"{d}/pass{k}"):
    p = json.load(open(f"{d}/pass{k}/profile.json"))
    s = [e["median_s"] for e in p["compute"] if e["batch"] == 256 and e["phase"] == "step"][0]
    h = json.load(gzip.open(f"{d}/pass{k}/homo.json.gz", "rt"))["summary"]
    rc = [r["median_compute_s"] * 1e3 for r in h["per_rank"]]
    up = [r["mean_update_s"] * 1e3 for r in h["per_rank"]]
    print(f"pass {k}: profile step at 256 {s * 1e3:.2f}; DDP ranks' compute "
          f"{', '.join(f'{x:.2f}' for x in rc)} (update {', '.join(f'{x:.2f}' for x in up)}); "
          f"profile / DDP compute {s * 1e3 / (sum(rc) / len(rc)):.2f}")
    k += 1
