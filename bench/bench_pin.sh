#!/usr/bin/env bash
# Pinned against unpinned worker threads (docs/performance.md, "Pinned workers"): alternates
# `hetsim real --pin auto` and `--pin none` runs of ssgd (2 workers, mlp, global batch 128,
# 200 iterations, the cpu backend) and prints per run the mean time per iteration and the share
# of steps whose compute overlapped the other worker's by less than half (steps run one after
# the other because both threads sat on one CPU), then the medians per setting.
# Usage: bench/bench_pin.sh BUILD_DIR [PAIRS] [POLICY]     (PAIRS defaults to 5, POLICY to ssgd)
set -eu
B=${1:?usage: bench_pin.sh BUILD_DIR [PAIRS] [POLICY]}
PAIRS=${2:-5}
POLICY=${3:-ssgd}
H=$B/hetsim
[ -x "$H" ] || { echo "bench_pin: no $H (build first)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo "bench_pin: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $POLICY"
for i in $(seq 1 "$PAIRS"); do
  for pin in auto none; do
    "$H" real --backend cpu --model mlp --policy "$POLICY" --global-batch 128 --iterations 200 --workers 2 \
      --train-samples 6000 --eval-samples 500 --eval-every 20 --db "$T/p.db" --pin $pin >/dev/null
    sqlite3 "$T/p.db" "
      WITH r AS (SELECT max(id) id FROM run),
      v AS (SELECT model_version, min(start_s) t FROM step, r WHERE run_id = r.id GROUP BY 1),
      s AS (SELECT a.worker, a.start_s, a.compute_end_s,
              (SELECT coalesce(sum(max(0, min(a.compute_end_s, b.compute_end_s) - max(a.start_s, b.start_s))), 0)
               FROM step b WHERE b.run_id = a.run_id AND b.worker <> a.worker
                 AND b.start_s < a.compute_end_s AND b.compute_end_s > a.start_s) ov
            FROM step a, r WHERE a.run_id = r.id)
      SELECT '$pin', printf('%.3f', 1e3 * (max(t) - min(t)) / (max(model_version) - min(model_version))),
             (SELECT printf('%.2f', avg(ov < 0.5 * (compute_end_s - start_s))) FROM s)
      FROM v" | tr '|' ' '
  done
done | tee "$T/rows"
python3 - "$T/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for pin in ("auto", "none"):
    r = [x for x in rows if x[0] == pin]
    print("--pin %s: median %.3f ms per iteration (%s), steps overlapped < half: median %.2f"
          % (pin, statistics.median(float(x[1]) for x in r), " ".join(x[1] for x in r),
             statistics.median(float(x[2]) for x in r)))
PY
