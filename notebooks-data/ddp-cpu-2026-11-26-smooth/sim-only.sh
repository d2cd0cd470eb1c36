#!/usr/bin/env bash
# LBB's last batches in simulation alone, on the 20 profiles of notebooks-data/ddp-cpu-2026-11-26-blas1
# (run A): each imported, the slowed cluster of bench/bench_ddp.sh, 120 iterations of cnn at
# global batch 512 under lbb:dynamic=0 (the static solve), lbb and lbb:smooth=8 with seeds 1-3.
# Usage (repository root): bash notebooks-data/ddp-cpu-2026-11-26-smooth/sim-only.sh HETSIM TMPDIR
set -euo pipefail
H=$(readlink -f "${1:?usage: sim-only.sh HETSIM TMPDIR}"); T=${2:?usage: sim-only.sh HETSIM TMPDIR}
D=notebooks-data/ddp-cpu-2026-11-26-blas1
for k in $(seq 1 20); do
  P=$T/p$k; mkdir -p "$P"; rm -f "$P"/*.db
  "$H" calib import "$D/pass$k/profile.json" --db "$P/cal.db" --json >"$P/import.json"
  DEV=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; d=d.get("imports",[d])[0] if "imports" in d else d; print(d["device"])' "$P/import.json")
  cat >"$P/slow.yaml" <<YAML
name: ddp-cpu
device_types:
  c: {compute: {cnn: {calib: "$DEV"}}}
nodes:
  - {name: n0, link: {calib: "$DEV"}, devices: [{type: c}, {type: c, slowdown: 2}]}
jitter: {calib: "$DEV"}
YAML
  line="pass $k"
  for pol in lbb:dynamic=0 lbb lbb:smooth=8; do
    for seed in 1 2 3; do
      rm -f "$P/s.db"
      "$H" sim --cluster "$P/slow.yaml" --model cnn --policy $pol --global-batch 512 --iterations 120 \
        --seed $seed --calib "$P/cal.db" --db "$P/s.db" --store steps --json >/dev/null
      b=$(sqlite3 "$P/s.db" "SELECT group_concat(batch,'/') FROM (SELECT batch FROM step WHERE step=(SELECT max(step) FROM step) ORDER BY worker)")
      line="$line  $pol seed $seed: $b"
      [ $pol = lbb:dynamic=0 ] && break
    done
  done
  echo "$line"
done
