#!/usr/bin/env python3
"""Builds results.csv and results.md from the JSON summaries run.sh left in WORKDIR.

Usage: tables.py WORKDIR OUTDIR full|quick VERSION

Every figure is read from a run's `hetsim sim --json` summary (or, for batches, from its step
rows); nothing here is a number of our own except the published figures, quoted from hetsim
issue 4. A missing run or key is an error, so a row is never written with a made-up value."""
import csv
import json
import math
import os
import sys


def load(work, name):
    with open(os.path.join(work, name + ".json")) as f:
        return json.load(f)


def pct(base, new):
    """Change from base to new in percent (negative: less)."""
    if base is None or new is None or not base:
        return None
    return 100.0 * (new - base) / base


def fmt(v, digits=2):
    if v is None:
        return "not reached"
    if isinstance(v, str):
        return v
    if math.isnan(v):
        return "nan"
    return f"{v:.{digits}f}"


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: tables.py WORKDIR OUTDIR full|quick VERSION")
    work, out, mode, version = sys.argv[1:]
    r = lambda name: load(work, name)
    rows = []

    def row(rid, comparison, metric, unit, convergence, base_pol, base_val, pol, pol_val, published,
            change=None, digits=2):
        if change is None and isinstance(base_val, (int, float)) and isinstance(pol_val, (int, float)):
            change = pct(base_val, pol_val)
        rows.append({
            "id": rid, "comparison": comparison, "metric": metric, "unit": unit,
            "convergence": convergence,
            "baseline": base_pol, "baseline_value": fmt(base_val, digits),
            "policy": pol, "policy_value": fmt(pol_val, digits),
            "our_change_pct": "" if change is None else f"{change:.1f}",
            "published": published,
        })

    # 1. SSGD vs LBB, lbb-4gpu, ResNet-18, B = 512
    s, l = r("c1_epoch_ssgd"), r("c1_epoch_lbb")
    c1 = "SSGD vs LBB, lbb-4gpu, ResNet-18, B=512"
    row("lbb_epoch", c1, "time per epoch (CIFAR-10, 50,000 samples)", "s", "none",
        "ssgd", s["sim_time_s"], "lbb", l["sim_time_s"], "62.44 s -> 22.12 s (-64.6%)")
    row("lbb_step", c1, "time per step (mean over the epoch)", "ms", "none",
        "ssgd", 1e3 * s["mean_iteration_s"], "lbb", 1e3 * l["mean_iteration_s"],
        "392.92 ms -> 104.94 ms (-73.3%)")

    def batches(name):
        with open(os.path.join(work, name + ".batches")) as f:
            b = f.read().split()
        if not b:
            sys.exit(f"tables.py: no step rows for {name}")
        return "[" + ", ".join(b) + "]"
    row("lbb_batches", c1, "batches of the first step", "samples", "none",
        "ssgd", batches("c1_epoch_ssgd"), "lbb", batches("c1_epoch_lbb"),
        "[128, 128, 128, 128] -> [167, 167, 158, 20]")
    s, l = r("c1_tta_ssgd"), r("c1_tta_lbb")
    row("lbb_tta", "SSGD vs LBB, lbb-4gpu, mlp on Fashion-MNIST (proxy), B=512",
        "time to 80% test accuracy", "s", "proxy",
        "ssgd", s["time_to_target_s"], "lbb", l["time_to_target_s"],
        "not in the table (the paper reports no accuracy lost)")

    # 2. LBB vs LBCAL, 1 Gbps
    b, c = r("c2_epoch_lbb"), r("c2_epoch_lbcal")
    row("lbcal_epoch", "LBB vs LBCAL, lbb-4gpu-1gbps, ResNet-18, B=512",
        "time per epoch (CIFAR-10, 50,000 samples)", "s", "none",
        "lbb", b["sim_time_s"], "lbcal", c["sim_time_s"], "LBCAL -45.7% against LBB")
    s, b, c = r("c2_acc_ssgd"), r("c2_acc_lbb"), r("c2_acc_lbcal")
    ref = s["final_accuracy"]
    lost = lambda x: None if ref is None or x["final_accuracy"] is None else 100.0 * (ref - x["final_accuracy"])
    row("lbcal_acc", "LBB vs LBCAL, lbb-4gpu-1gbps, mlp on Fashion-MNIST (proxy), B=512",
        f"accuracy lost after 2 epochs, against SSGD's {fmt(100 * ref if ref is not None else None)}%",
        "percentage points", "proxy", "lbb", lost(b), "lbcal", lost(c),
        "LBB 3.98%, LBCAL 1.28%", change=None)
    rows[-1]["our_change_pct"] = ""
    row("lbcal_acc_time", "LBB vs LBCAL, lbb-4gpu-1gbps, mlp on Fashion-MNIST (proxy), B=512",
        "time for 2 epochs (mlp's gradient)", "s", "proxy",
        "lbb", b["sim_time_s"], "lbcal", c["sim_time_s"], "(context; mlp is not the paper's model)")

    # 3. ADSP vs ASHL, ashl-3worker, analytic convergence
    for m, target, note in (("mlp", 0.45, "fitted to proxy runs"), ("resnet18", 0.5, "illustrative defaults")):
        a, h, p = r(f"c3_{m}_adsp"), r(f"c3_{m}_ashl"), r(f"c3_{m}_ps-bsp")
        cmp3 = f"ADSP vs ASHL, ashl-3worker, {m}, B=192 (analytic, {note})"
        row(f"ashl_{m}", cmp3, f"time to training loss {target}", "s", "analytic",
            "adsp", a["time_to_target_s"], "ashl", h["time_to_target_s"], "ASHL more than 35% less than ADSP")
        row(f"ashl_{m}_bsp", cmp3, f"time to training loss {target}, synchronous reference", "s", "analytic",
            "ps-bsp", p["time_to_target_s"], "ashl", h["time_to_target_s"], "(context; not in the paper's figure)")
    a, h, p = r("c3p_mlp_adsp"), r("c3p_mlp_ashl"), r("c3p_mlp_ps-bsp")
    cmp3 = "ADSP vs ASHL, ashl-3worker, mlp on Fashion-MNIST (proxy), B=192"
    row("ashl_mlp_proxy", cmp3, "time to training loss 0.45", "s", "proxy",
        "adsp", a["time_to_target_s"], "ashl", h["time_to_target_s"], "ASHL more than 35% less than ADSP")
    row("ashl_mlp_proxy_bsp", cmp3, "time to training loss 0.45, synchronous reference", "s", "proxy",
        "ps-bsp", p["time_to_target_s"], "ashl", h["time_to_target_s"], "(context; not in the paper's figure)")

    # 4. alloc-static vs alloc-adaptive on the ring
    for ev, label in (("members", "worker replaced at 10 s, worker added at 20 s"),
                      ("slow", "the same, and worker 0 slowed 2x from 5 s")):
        st, ad = r(f"c4_{ev}_alloc-static"), r(f"c4_{ev}_alloc-adaptive")
        row(f"alloc_{ev}", f"proportional vs self-adaptive allocation, alloc-ring, ResNet-18, B=512: {label}",
            "time for 3 epochs (150,000 samples)", "s", "none",
            "alloc-static", st["sim_time_s"], "alloc-adaptive", ad["sim_time_s"],
            "self-adaptive 33% to 50% less than proportional")

    fields = ["id", "comparison", "metric", "unit", "convergence", "baseline", "baseline_value",
              "policy", "policy_value", "our_change_pct", "published"]
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)

    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("# Papers' comparisons: our figures beside the published ones\n\n")
        quick = " --quick" if mode != "full" else ""
        f.write(f"Written by `bash notebooks-data/papers/run.sh HETSIM{quick}` ({mode} run, {version}, "
                "HETSIM the path of the hetsim binary); every `hetsim sim` command is in `commands.txt`.\n"
                "What each figure means and why it differs: `docs/papers.md`.\n")
        if mode != "full":
            f.write("\n**Quick run: tiny iteration counts, the numbers mean nothing.**\n")
        f.write("\n| id | comparison | metric | ours: baseline | ours: policy | our change | published |\n")
        f.write("|---|---|---|---|---|---|---|\n")
        for x in rows:
            ch = f"{x['our_change_pct']}%" if x["our_change_pct"] else ""
            f.write(f"| {x['id']} | {x['comparison']} | {x['metric']} ({x['unit']}; convergence: "
                    f"{x['convergence']}) | {x['baseline']} {x['baseline_value']} | {x['policy']} "
                    f"{x['policy_value']} | {ch} | {x['published']} |\n")


if __name__ == "__main__":
    main()
