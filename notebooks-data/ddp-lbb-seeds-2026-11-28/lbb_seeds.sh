#!/usr/bin/env bash
# Where LBB's per-iteration rule leaves the batches of bench_ddp.sh's slowed cluster, by seed:
# for each seed 1..N, `hetsim sim` runs lbb (and lbb:smooth=8) for 3 x 40 iterations on one
# pass's calibration (as bench_ddp.sh's lbb case does, which uses the default seed) and prints
# worker 0's batch every 10 iterations and at the end, beside the static solve's.
#   bash lbb_seeds.sh HETSIM PASSDIR [N]     (PASSDIR: a bench_ddp.sh pass with cal.db, slow.yaml)
set -euo pipefail
H=$(readlink -f "$1"); P=$(readlink -f "$2"); N=${3:-20}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for pol in lbb lbb:smooth=8; do
  for s in $(seq 1 "$N"); do
    "$H" sim --cluster "$P/slow.yaml" --model cnn --policy "$pol" --global-batch 512 --iterations 120 \
      --calib "$P/cal.db" --db "$T/$s.db" --store steps --seed "$s" --json >/dev/null
    /usr/bin/python3 - "$T/$s.db" "$pol" "$s" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
b0 = dict(c.execute("SELECT step, batch FROM step WHERE worker = 0"))
last = max(b0)
print(f"{sys.argv[2]:13} seed {sys.argv[3]:>2}: worker 0's batch every 10 iterations "
      f"{' '.join(str(b0[s]) for s in range(0, last, 10))}; at the end {b0[last]}")
PY
    rm -f "$T/$s.db"
  done
done
