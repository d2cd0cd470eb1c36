#!/usr/bin/env bash
# What the analytic convergence model adds to the simulator's run time: SSGD on the bundled
# 1,024-GPU cluster, resnet18, global batch 65,536, 1,000 iterations, summary only, with and
# without --convergence analytic, runs alternated so that both see the same machine load.
# Prints each run's CPU time (user + system of the process, which a loaded machine inflates far
# less than wall time) and wall_s, then the medians and the overhead of analytic over none.
# With CALLGRIND=1 it also counts instructions once per setting under valgrind's callgrind
# (deterministic, so the figure to compare across machines and loads).
# Usage: bench/bench_conv.sh [path/to/hetsim] [REPS]     (docs/performance.md has the figures)
set -eu
H=${1:-build/hetsim}
REPS=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ARGS=(sim --cluster "$HERE/../traces/hetero-1024gpu.yaml" --model resnet18 --policy ssgd
      --global-batch 65536 --iterations 1000 --store summary --db "$T/b.db" --json)
python3 - "$H" "$REPS" "$T" "${ARGS[@]}" <<'PY'
import json, os, statistics, subprocess, sys
h, reps, tmp, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
cpu = {"none": [], "analytic": []}
for rep in range(1, reps + 1):
    for conv in ("none", "analytic"):
        for f in os.listdir(tmp):
            if f.startswith("b.db"):
                os.remove(os.path.join(tmp, f))
        p = subprocess.Popen([h] + args + ["--convergence", conv], stdout=subprocess.PIPE)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit(f"{h} failed with status {status}")
        j = json.loads(out)
        c = 1000 * (ru.ru_utime + ru.ru_stime)
        cpu[conv].append(c)
        print(f"rep={rep} convergence={conv} cpu_ms {c:.1f} wall_s {j['wall_s']:.4f} events {j['events']}")
a, b = statistics.median(cpu["none"]), statistics.median(cpu["analytic"])
ratios = sorted(y / x for x, y in zip(cpu["none"], cpu["analytic"]))
print(f"median cpu_ms: none {a:.1f}, analytic {b:.1f}, overhead {100 * (b / a - 1):+.1f}% "
      f"(median of the {len(ratios)} paired ratios {100 * (statistics.median(ratios) - 1):+.1f}%)")
PY
if [ "${CALLGRIND:-0}" = 1 ]; then
  for conv in none analytic; do
    rm -f "$T/b.db"*
    valgrind --tool=callgrind --callgrind-out-file="$T/cg.$conv" "$H" "${ARGS[@]}" \
      --convergence $conv >/dev/null 2>"$T/cg.$conv.log"
    echo "callgrind convergence=$conv instructions $(sed -n 's/.*Collected : //p' "$T/cg.$conv.log")"
  done
fi
