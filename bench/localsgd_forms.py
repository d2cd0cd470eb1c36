#!/usr/bin/env python3
"""localsgd_forms.py: which form of local SGD's loss of progress follows real local SGD? An
offline check on bench/bench_localsgd.sh's curves (docs/performance.md, "Local SGD against
PyTorch's model averaging"); it needs SciPy (Debian: python3-scipy) and nothing of hetsim.

    /usr/bin/python3 bench/localsgd_forms.py OUTDIR/evals.csv [--fit-seed 1] [--fit-taus 1,64]

As hetsim's fit does (cli/cmd_fit.c), the loss curve l(k) = 1/(beta0 k + beta1) + beta2 is
fitted to the fit seed's DDP curve (T = 1), k = samples / D (D = 60,000; one local step of all
workers is 128 samples here, the reference batch, so E = 1), and then the penalty alone to its
local-SGD curves at the other periods of --fit-taus. Forms of the progress kept per sample,
k = samples P(T) / D:
  linear   P = 1 / (1 + lambda (T - 1))            hetsim's Ptau
  power G  P = 1 / (1 + lambda (T - 1)^G), G = 1.5 and 2, and G fitted with lambda (when
           --fit-taus holds two periods or more besides 1)
  floor    P = 1, and the loss raised by mu (T - 1)  (local SGD's drift term in theory)
For each period and loss target, the other seeds' median first evaluation at the target against
each form's (evaluations every max(16, T) local steps, as the bench); prints the mean absolute
error over the pairs where both are reached, and how many pairs that is.
"""
import argparse
import csv
import math
import statistics
from collections import defaultdict

from scipy.optimize import least_squares

D, U = 60000.0, 128


def curve(b, k):
    return 1 / (b[0] * k + b[1]) + b[2]


FORMS = {  # name: (loss at local step i of period t under parameters q, q's starting values)
    "linear": (lambda b, q, t, i: curve(b, i * U / (1 + q[0] * (t - 1)) / D), [0.01]),
    "power 1.5": (lambda b, q, t, i: curve(b, i * U / (1 + q[0] * (t - 1) ** 1.5) / D), [0.01]),
    "power 2": (lambda b, q, t, i: curve(b, i * U / (1 + q[0] * (t - 1) ** 2) / D), [0.01]),
    "floor": (lambda b, q, t, i: curve(b, i * U / D) + q[0] * (t - 1), [0.01]),
    # the exponent fitted too: needs two periods or more besides 1
    "power G": (lambda b, q, t, i: curve(b, i * U / (1 + q[0] * (t - 1) ** q[1]) / D), [0.01, 1.0]),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("evals")
    p.add_argument("--fit-seed", default="1")
    p.add_argument("--fit-taus", default="1,64")
    p.add_argument("--targets", default="0.6,0.5,0.45")
    p.add_argument("--eval-every", type=int, default=16)
    a = p.parse_args()
    ev = defaultdict(list)
    for r in csv.DictReader(open(a.evals)):
        ev[(int(r["tau"]), r["seed"])].append((int(r["iteration"]), float(r["loss"])))
    fit_taus = [int(t) for t in a.fit_taus.split(",")]
    targets = [float(x) for x in a.targets.split(",")]
    sync = ev[(1, a.fit_seed)]
    r = least_squares(lambda x: [curve([math.exp(v) for v in x], i * U / D) - l for i, l in sync],
                      [math.log(20), math.log(0.5), math.log(0.3)])
    b = [math.exp(v) for v in r.x]
    local = [(t, i, l) for t in fit_taus if t > 1 for i, l in ev[(t, a.fit_seed)]]
    taus = sorted({t for t, _ in ev})
    print(f"curve from seed {a.fit_seed}'s DDP curve: beta0 {b[0]:.4g} (per epoch of {D:.0f}), "
          f"beta1 {b[1]:.4g}, beta2 {b[2]:.4g}; penalties from its periods {fit_taus[1:]}")
    n_local = len({t for t in fit_taus if t > 1})
    for name, (form, q0) in FORMS.items():
        if len(q0) > n_local:
            continue
        r = least_squares(lambda x: [form(b, [math.exp(v) for v in x], t, i) - l for t, i, l in local],
                          [math.log(v) for v in q0])
        q = [math.exp(v) for v in r.x]
        errs, cells = [], []
        for t in taus:
            every = max(a.eval_every, t)
            for target in targets:
                first = [next((i for i, l in sorted(c) if l <= target), None)
                         for (tt, s), c in ev.items() if tt == t and s != a.fit_seed]
                met = sorted(i for i in first if i is not None)
                med = statistics.median(met) if 2 * len(met) > len(first) else None
                pred = next((i for i in range(0, 200 * every * 64, every)
                             if form(b, q, t, i) <= target), None)
                if med and pred:
                    errs.append(abs(pred / med - 1))
                cells.append(f"{t}/{target:g}: {med} vs {pred}")
        mae = f"{statistics.mean(errs):.1%}" if errs else "-"
        print(f"{name:>9}: parameters {', '.join(f'{v:.4g}' for v in q)}, mean absolute error {mae} over {len(errs)} of "
              f"{len(cells)} (period/target: seeds' median vs predicted local steps)")
        print("           " + "; ".join(cells))


if __name__ == "__main__":
    main()
