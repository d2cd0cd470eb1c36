#!/usr/bin/env bash
# Cost of --trace-out (sim/sim_trace.c): CPU seconds (user + sys of the hetsim process, from
# wait4's rusage) of the same run without a trace, with a trace to a file and with a trace to
# /dev/null (the formatting alone), run alternately REPS times; prints each run and the medians,
# and the ratio of the medians to the run without a trace. The trace file is removed before each
# traced run (outside the timing), then the file system synced and left 0.2 s, so no run pays for
# freeing the previous run's trace; each repetition starts with the next kind. (Before, the run
# without a trace always came right after OLD_HETSIM's traced run, and its median was up to 25%
# above OLD_HETSIM's own run without a trace, which the two builds do not differ in.)
# Scenarios: SSGD on traces/hetero-1024gpu.yaml (1,024 workers) x 1,000 iterations, and asp on
# bench/gen_ps_cluster.sh 1024 x 204,800 updates. docs/performance.md has the figures.
# Usage: bench/bench_trace.sh [HETSIM] [REPS] [SCENARIOS] [OLD_HETSIM]
#   e.g. bench/bench_trace.sh build/hetsim 7 "ssgd asp" /tmp/old/hetsim
# With OLD_HETSIM, its runs without a trace and with one to a file alternate with the others.
# With CALLGRIND=1, counts instructions (valgrind --tool=callgrind) of one run of each kind
# instead: the kernel's copy of the file into the page cache is not in those counts.
set -eu
H=${1:-build/hetsim}
REPS=${2:-5}
SCEN=${3:-ssgd asp}
OLD=${4:-}
# --trace-out /dev/null: only with a build that writes a device in place (before commit b451313
# hetsim renamed its temporary file over the target, which as root replaced /dev/null).
NULL_OK=0
grep -q hs_trace_open_file "$H" && NULL_OK=1 || echo "bench_trace.sh: $H predates in-place device output: no /dev/null runs" >&2
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/bench_trace.XXXXXX")
trap 'rm -rf "$T"' EXIT
bash "$HERE/gen_ps_cluster.sh" 1024 >"$T/ps1024.yaml"

args_of() {
  case $1 in
    ssgd) echo "--cluster $HERE/../traces/hetero-1024gpu.yaml --model resnet18 --policy ssgd --global-batch 65536 --iterations 1000" ;;
    asp) echo "--cluster $T/ps1024.yaml --model resnet18 --policy asp --global-batch 32768 --iterations 204800" ;;
    *) echo "bench_trace.sh: unknown scenario $1 (ssgd, asp)" >&2; exit 2 ;;
  esac
}

if [ "${CALLGRIND:-0}" = 1 ]; then
  command -v valgrind >/dev/null || { echo "bench_trace.sh: CALLGRIND=1 needs valgrind" >&2; exit 2; }
  for s in $SCEN; do
    read -r -a A <<<"$(args_of "$s")"
    for kind in none file; do
      rm -f "$T/b.db"* "$T/t.json" "$T/cg.out"
      extra=(); [ $kind = file ] && extra=(--trace-out "$T/t.json")
      valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" "$H" sim "${A[@]}" --store summary \
        --db "$T/b.db" "${extra[@]}" >/dev/null 2>"$T/err" || { cat "$T/err" >&2; exit 1; }
      ir=$(sed -n 's/^summary: *//p; s/^totals: *//p' "$T/cg.out" | head -1)
      bytes=$([ -f "$T/t.json" ] && stat -c %s "$T/t.json" || echo 0)
      echo "$s $kind: instructions $ir, trace bytes $bytes"
      eval "ir_$kind=$ir"
    done
    awk -v a="$ir_file" -v b="$ir_none" -v s="$s" 'BEGIN { printf "%s: instructions with the trace / without: %.3f\n", s, a / b }'
  done
  exit 0
fi

python3 - "$H" "$REPS" "$T" "$SCEN" "$(args_of ssgd)" "$(args_of asp)" "$OLD" "$NULL_OK" <<'PY'
import os, statistics, subprocess, sys, time
h, reps, tmp, scen = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split()
args = {"ssgd": sys.argv[5].split(), "asp": sys.argv[6].split()}
old = sys.argv[7]
kinds = {"none": [], "file": ["--trace-out", f"{tmp}/t.json"]}
if sys.argv[8] == "1":
    kinds["null"] = ["--trace-out", "/dev/null"]
if old:  # the old build's run without a trace, and with one to a file
    kinds["old_none"] = []
    kinds["old_file"] = kinds["file"]

def cpu(cmd):
    """user and sys seconds of one run of cmd (its own rusage, from wait4)"""
    with open(os.devnull, "w") as null:
        p = subprocess.Popen(cmd, stdout=null, stderr=null)
        _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"bench_trace.sh: {' '.join(cmd)} failed ({status})")
    return ru.ru_utime, ru.ru_stime

def load():
    """the 1-minute load average: the VM is shared, and other work moves these figures"""
    with open("/proc/loadavg") as f:
        return f.read().split()[0]

for s in scen:
    load0 = load()
    t = {k: [] for k in kinds}
    order = list(kinds)
    for r in range(reps):
        # Each repetition starts one kind later, so that no kind always runs right after the
        # same other one.
        for k in order[r % len(order):] + order[:r % len(order)]:
            extra = kinds[k]
            for f in ("b.db", "b.db-wal", "b.db-shm", "t.json"):
                if os.path.exists(f"{tmp}/{f}"):
                    os.remove(f"{tmp}/{f}")
            # Removing a 254 MB trace leaves the kernel work (the journal, freeing its blocks)
            # that ran beside the next run and slowed it: let it finish first.
            os.sync()
            time.sleep(0.2)
            u, sy = cpu([old if k.startswith("old") else h, "sim", *args[s], "--store", "summary",
                         "--db", f"{tmp}/b.db", *extra])
            t[k].append((u, sy))
            if k == "file":
                size = os.path.getsize(f"{tmp}/t.json")
            print(f"{s} rep {r + 1} {k:8}: user {u:.3f} s, sys {sy:.3f} s, CPU {u + sy:.3f} s", flush=True)
    base = statistics.median(u + sy for u, sy in t["none"])
    print(f"== {s}: medians of {reps} alternated runs; trace {size} bytes; load average {load0} -> {load()}")
    for k in kinds:
        cpus = [u + sy for u, sy in t[k]]
        m = statistics.median(cpus)
        rel = statistics.median(u + sy for u, sy in t["old_none"]) if k.startswith("old") else base
        print(f"{s} {k:8}: CPU {m:.3f} s (user {statistics.median(u for u, _ in t[k]):.3f}, "
              f"sys {statistics.median(sy for _, sy in t[k]):.3f}), x{m / rel:.2f} of no trace")
PY
