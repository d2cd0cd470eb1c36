#!/usr/bin/env bash
# hetsim against SimGrid on the parameter server with a contended server link
# (bench/gen_ps_cluster.sh: server 100Gbps, workers 25Gbps; bench/simgrid_ps.cpp is the SimGrid
# peer of the same scenario). For each size and policy both are run alternately REPS times; the
# CPU seconds (user + sys of the whole process, start-up included, from getrusage) are given as
# medians with their ratio, and the two answers (simulated time at the last update) with their
# relative difference. docs/performance.md has the figures and the machine.
# Usage: bench/bench_ps.sh [HETSIM] [REPS] [SIZES]   e.g. bench/bench_ps.sh build/hetsim 5 "64 1024 4096"
# Needs Debian's libsimgrid-dev (apt-get install libsimgrid-dev) and g++.
set -eu
H=${1:-build/hetsim}
REPS=${2:-5}
SIZES=${3:-64 1024 4096}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PEER=$T/simgrid_ps
g++ -O2 -std=c++17 -o "$PEER" "$HERE/simgrid_ps.cpp" -lsimgrid
BYTES=44695848 # resnet18's fp32 gradient, as `hetsim models` gives it
UPDATE=0.001   # parameter_server.update_time of gen_ps_cluster.sh

# cpu COMMAND...: runs it, prints "CPU_SECONDS<TAB>stdout" (children's user + sys, microseconds).
cpu() {
  /usr/bin/python3 - "$@" <<'EOF'
import resource, subprocess, sys
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
if p.returncode:
    sys.exit(f"{sys.argv[1]} exited {p.returncode}: {p.stderr[-500:]}")
t = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(f"{t:.6f}\t" + p.stdout.replace("\n", " "))
EOF
}

printf '%-7s %6s %7s %12s %12s %8s %22s %22s %9s\n' policy N updates "hetsim CPU s" "SimGrid CPU s" ratio "hetsim answer s" "SimGrid answer s" "rel diff"
for n in $SIZES; do
  bash "$HERE/gen_ps_cluster.sh" "$n" >"$T/c.yaml"
  for mode in ps-bsp asp; do
    # As many updates as SimGrid runs in seconds: hetsim's start-up (the cluster file, a new
    # database) is then a small part of its time, as it is of a real study's.
    if [ "$mode" = ps-bsp ]; then
      case $n in 64 | 1024) k=100 ;; *) k=20 ;; esac
    else
      case $n in 64) k=$((100 * n)) ;; 1024) k=$((20 * n)) ;; *) k=$n ;; esac
    fi
    : >"$T/h"; : >"$T/s"
    for ((r = 0; r < REPS; r++)); do
      rm -f "$T/b.db"*
      cpu "$H" sim --cluster "$T/c.yaml" --model resnet18 --policy "$mode" --global-batch $((32 * n)) \
        --iterations "$k" --store summary --db "$T/b.db" --json >>"$T/h"
      cpu "$PEER" "$mode" "$n" "$k" "$BYTES" "$UPDATE" --cfg=network/model:CM02 \
        --cfg=network/crosstraffic:0 --log=root.thres:warning >>"$T/s"
    done
    /usr/bin/python3 - "$T/h" "$T/s" "$mode" "$n" "$k" <<'EOF'
import json, re, statistics, sys
h = [l.split("\t", 1) for l in open(sys.argv[1])]
s = [l.split("\t", 1) for l in open(sys.argv[2])]
hc = statistics.median(float(a) for a, _ in h)
sc = statistics.median(float(a) for a, _ in s)
ha = json.loads(h[0][1])["sim_time_s"]
sa = float(re.search(r"sim_time_s (\S+)", s[0][1]).group(1))
print(f"{sys.argv[3]:<7} {sys.argv[4]:>6} {sys.argv[5]:>7} {hc:12.4f} {sc:12.4f} {sc / hc:8.1f} "
      f"{ha:22.17g} {sa:22.17g} {abs(ha - sa) / sa:9.2g}")
EOF
  done
done
