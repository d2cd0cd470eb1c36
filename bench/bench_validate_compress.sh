#!/usr/bin/env bash
# hetsim validate on runs of a compressing policy (ashl: top-k pushes), with and without the
# calibrated compressor round trip (compress_sample, calib/cal_compress.h).
#
# One calibration of the cpu (steps, communication and the round trip on MODEL's gradient);
# a copy of it without the round trip (the simulation then charges the cost model's reference
# device, as before 2026-11-29). Then REPS real runs of POLICY on 2 threads, each validated
# against both. Prints the round trip, and per run: the mean iteration error and the total time
# error with each calibration, and the mean communication per step of the real run and of
# each simulation. Both simulations send the gradient as fp32 (dense), as the real runtimes do.
#
#   bash bench/bench_validate_compress.sh HETSIM [REPS] [MODEL] [POLICY] [ITER]
set -eu
H=${1:?usage: bench_validate_compress.sh HETSIM [REPS] [MODEL] [POLICY] [ITER]}
REPS=${2:-5}
MODEL=${3:-mlp}
POLICY=${4:-ashl}
ITER=${5:-200}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$H" calib --device cpu --model "$MODEL" --db "$T/cz.db" --min-reps 5 --max-reps 20 --json >"$T/calib.json" 2>/dev/null
python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["compress"]:
    print("# round trip: %s %g on %d floats: %.4f ms, cost model %.4f ms" % (c["compressor"], c["setting"], c["elems"],
          1e3 * c["median_s"], 1e3 * c["model_s"]))' "$T/calib.json"
cp "$T/cz.db" "$T/c.db"
sqlite3 "$T/c.db" "DELETE FROM compress_sample"
printf "rep\treal_comm_ms\tmean_err_model\ttotal_err_model\tsim_comm_ms_model\tmean_err_calib\ttotal_err_calib\tsim_comm_ms_calib\n"
for rep in $(seq 1 "$REPS"); do
  "$H" real --model "$MODEL" --policy "$POLICY" --workers 2 --iterations "$ITER" --global-batch 64 \
    --train-samples 4000 --eval-samples 300 --db "$T/r.db" --json >"$T/run.json" 2>/dev/null
  id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"])' "$T/run.json")
  "$H" validate "$id" --db "$T/r.db" --calib "$T/c.db" --json >"$T/v0.json"
  "$H" validate "$id" --db "$T/r.db" --calib "$T/cz.db" --json >"$T/v1.json"
  python3 -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[2:4])
assert a["compress_scale"] is None and b["compress_scale"] > 0
print("%s\t%.3f\t%+.3f\t%+.3f\t%.3f\t%+.3f\t%+.3f\t%.3f" % (sys.argv[1], 1e3 * a["real_step"]["comm_s"],
      a["mean_iter_error"], a["total_time_error"], 1e3 * a["sim_step"]["comm_s"],
      b["mean_iter_error"], b["total_time_error"], 1e3 * b["sim_step"]["comm_s"]))' "$rep" "$T/v0.json" "$T/v1.json"
done
