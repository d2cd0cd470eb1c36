#!/usr/bin/env bash
# hetsim calib / devices / sim --calib end to end on the cpu backend, kept to a few seconds:
# a small sweep with few repetitions, resume, the devices listing, a simulation on the fitted
# model, and bad input (exit 2 with a clear message).
# usage: cli_calib.sh HETSIM_BINARY SOURCE_DIR
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
q() { sqlite3 cal.db "$1"; }

quick=(--max-reps 6 --min-reps 3 --warmup 1 --comm-max 256KiB)
"$bin" calib --device cpu --model mlp --batches 8,16,32,64 --db cal.db "${quick[@]}" > out.txt 2> err.txt
[ $? -eq 0 ] || { fail "calib exit status"; cat err.txt; }
# stderr is a file: no progress line (core_progress draws on a terminal only).
! grep -q $'\r' err.txt || fail "progress drawn into a file: $(cat -v err.txt)"
grep -q "mlp: 4 batch sizes timed, 0 already stored" out.txt || fail "calib summary: $(cat out.txt)"
[ "$(q "SELECT count(*) FROM device WHERE kind = 'cpu' AND blas IS NOT NULL AND host IS NOT NULL")" = 1 ] || fail "device row"
[ "$(q "SELECT count(*) FROM calib_sample WHERE model = 'mlp'")" = 16 ] || fail "calib_sample rows (4 batches x 4 phases)"
[ "$(q "SELECT count(*) FROM calib_sample WHERE median_s > 0 AND p10_s <= median_s AND median_s <= p90_s AND count >= 3 AND count <= 6")" = 16 ] || fail "calib_sample statistics"
[ "$(q "SELECT count(*) FROM perf_model WHERE model = 'mlp' AND chosen = 1")" = 4 ] || fail "one chosen fit per phase"
[ "$(q "SELECT count(*) FROM perf_model WHERE phase = 'step' AND chosen = 1 AND heldout_rel_error IS NOT NULL AND json_valid(params)")" = 1 ] || fail "step fit"
[ "$(q "SELECT count(*) FROM comm_model WHERE backend = 'cpu' AND beta_bytes_per_s > 0 AND alpha_s >= 0")" = 2 ] || fail "comm_model rows"
[ "$(q "SELECT count(*) FROM comm_sample")" = 9 ] || fail "comm_sample rows (4 sizes x 2 ops, and the hand-off)"
# The hand-off latency: one sample (2 threads, 0 bytes), no fitted model, printed.
[ "$(q "SELECT count(*) FROM comm_sample WHERE op = 'wake' AND backend = 'cpu' AND world_size = 2 AND bytes = 0
    AND p10_s > 0 AND p10_s <= median_s AND median_s <= p90_s AND p90_s < 1 AND count >= 3 AND count <= 6")" = 1 ] || fail "wake sample"
[ "$(q "SELECT count(*) FROM comm_model WHERE op = 'wake'")" = 0 ] || fail "wake has no comm_model"
grep -q "cpu hand-off (wake): median [0-9.]* us" out.txt || fail "wake printed: $(cat out.txt)"
# The compressor's round trip on mlp's gradient (203,530 floats; calib/cal_compress.h): one
# sample, slower on this cpu than the cost model's reference GPU, printed.
[ "$(q "SELECT count(*) FROM compress_sample WHERE compressor = 'topk' AND setting = 0.1 AND elems = 203530
    AND p10_s > 0 AND p10_s <= median_s AND median_s <= p90_s AND p90_s < 1 AND count >= 3 AND count <= 6")" = 1 ] ||
  fail "compress_sample row: $(q "SELECT * FROM compress_sample")"
grep -q "compress topk 0.1 on 203530 floats: median [0-9.e-]* ms a round trip" out.txt || fail "compress printed: $(cat out.txt)"

# Resume: the stored points are skipped; a new batch size is timed; fits are refitted.
"$bin" calib --device cpu --model mlp --batches 8,16,32,64,96 --db cal.db "${quick[@]}" > out2.txt 2>&1 || fail "rerun exit status"
grep -q "mlp: 1 batch sizes timed, 4 already stored" out2.txt || fail "resume: $(cat out2.txt)"
[ "$(q "SELECT count(*) FROM calib_sample")" = 20 ] || fail "resume added one point"
[ "$(q "SELECT count(*) FROM device")" = 1 ] || fail "resume reused the device row"
[ "$(q "SELECT count(*) FROM comm_sample")" = 9 ] || fail "resume skipped the stored message sizes and hand-off"
grep -q "cpu hand-off (wake): already stored" out2.txt || fail "resume: wake: $(cat out2.txt)"
grep -q "compress topk 0.1 on 203530 floats: already stored" out2.txt || fail "resume: compress: $(cat out2.txt)"
[ "$(q "SELECT count(*) FROM compress_sample")" = 1 ] || fail "resume skipped the stored round trip"

# --pin none (for runs with `hetsim real --pin none`): the concurrent calibration runs unpinned.
"$bin" calib --device cpu --model mlp --batches 8,16,32 --db pin.db --no-comm --concurrent 2 --pin none \
  --max-reps 4 --min-reps 3 --warmup 1 > /dev/null 2> err.txt || fail "calib --pin none: $(cat err.txt)"
[ "$(sqlite3 pin.db "SELECT count(*) FROM calib_sample WHERE phase = 'step'")" = 3 ] || fail "calib --pin none rows"
[ "$(sqlite3 pin.db "SELECT count(*) FROM compress_sample")" = 0 ] || fail "--no-comm (with --concurrent here) times no compressor"
# --redo times the round trip again (the device's rows deleted first; the mark set between the
# two runs goes with them).
for r in 1 2; do
  "$bin" calib --device cpu --model mlp --batches 8,16,24 --db redo.db "${quick[@]}" --comm-max 16KiB $([ $r = 2 ] && echo --redo) \
    > /dev/null 2> err.txt || fail "calib redo $r: $(cat err.txt)"
  [ $r = 1 ] && sqlite3 redo.db "UPDATE compress_sample SET count = 99"
done
[ "$(sqlite3 redo.db "SELECT count(*) || ' ' || (max(count) < 99) FROM compress_sample")" = "1 1" ] ||
  fail "--redo: compress_sample $(sqlite3 redo.db "SELECT * FROM compress_sample")"

# JSON output.
"$bin" calib --device cpu --model mlp --batches 8,16,32,64,96 --db cal.db "${quick[@]}" --json > out.json || fail "json exit"
grep -q '"skipped": 5' out.json || fail "json skipped count"
python3 -c 'import json,sys; w = json.load(open(sys.argv[1]))["wake"]; sys.exit(0 if w == {"measured": 0, "skipped": 1,
  "median_s": None, "p10_s": None, "p90_s": None} else 1)' out.json || fail "json wake: $(cat out.json)"
python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["compress"]; sys.exit(0 if len(c) == 1
  and c[0]["compressor"] == "topk" and c[0]["setting"] == 0.1 and c[0]["elems"] == 203530 and c[0]["measured"] == 0
  and c[0]["median_s"] is None and 0 < c[0]["model_s"] < 1e-3 else 1)' out.json || fail "json compress: $(cat out.json)"
python3 -c 'import json,sys; d = json.load(open(sys.argv[1]))["device"]; sys.exit(0 if d["kind"] == "cpu"
  and d["sm_partition"] is None and d["spec"] == "cpu" else 1)' out.json || fail "json device: $(cat out.json)"

# hetsim devices
"$bin" devices --db cal.db > dev.txt || fail "devices exit"
grep -q "mlp" dev.txt || fail "devices lists mlp: $(cat dev.txt)"
"$bin" devices --db cal.db --csv | grep -q "^1,.*,cpu,.*,mlp," || fail "devices --csv"
"$bin" devices --db cal.db --json | grep -q '"model": "mlp"' || fail "devices --json"

# The simulator takes the calibration: at a calibrated batch its measured step median, elsewhere
# the fitted model.
name=$(q "SELECT name FROM device WHERE id = 1")
cat > cl.yaml <<YAML
name: calib-test
network: {bandwidth: 10Gbps, latency: 20us}
device_types:
  mine: {memory: 8GiB, compute: {calib: "$name"}}
nodes:
  - name: n0
    link: {bandwidth: 8GB/s, latency: 5us}
    devices: [{type: mine}]
YAML
sim_iter() { # global batch -> the simulated mean iteration (one worker: one step, no communication)
  "$bin" sim --cluster cl.yaml --model mlp --policy ssgd --global-batch "$1" --iterations 3 --db sim.db --calib cal.db --json > sim.json || fail "sim --calib exit"
  sed -n 's/.*"mean_iteration_s": \([0-9.e+-]*\).*/\1/p' sim.json
}
same() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 1e-9 * b) }'; }
iter=$(sim_iter 32)
want=$(q "SELECT median_s FROM calib_sample WHERE phase = 'step' AND batch = 32 ORDER BY id DESC LIMIT 1")
same "$iter" "$want" || fail "sim iteration at a calibrated batch: $iter, measured t(32) $want"
iter=$(sim_iter 24)
t24=$(q "SELECT params FROM perf_model WHERE phase = 'step' AND chosen = 1")
want=$(q "SELECT CASE form WHEN 'linear' THEN json_extract(params,'\$.t0') + 24*json_extract(params,'\$.k') ELSE -1 END FROM perf_model WHERE phase='step' AND chosen=1")
[ "$want" = "-1" ] || same "$iter" "$want" || fail "sim iteration between calibrated batches: $iter, fitted t(24) $want ($t24)"
"$bin" sim --cluster cl.yaml --model cnn --policy ssgd --global-batch 32 --iterations 3 --db sim.db --calib cal.db > /dev/null 2> err.txt
[ $? -eq 2 ] && grep -q "no calibrated step model for cnn" err.txt && grep -q "it holds:.*mlp" err.txt || fail "sim with an uncalibrated model: $(cat err.txt)"
sed -i "s/calib: \"$name\"/calib: \"no such gpu\"/" cl.yaml
"$bin" sim --cluster cl.yaml --model mlp --policy ssgd --global-batch 32 --iterations 3 --db sim.db --calib cal.db > /dev/null 2> err.txt
[ $? -eq 2 ] && grep -q 'device "no such gpu"' err.txt || fail "sim with an unknown device: $(cat err.txt)"

# --time-limit: a sweep far longer than its limit (3 x 1000 timed steps of cnn, about 8 s on
# this 2-core VM) stops at it like
# an interrupt: exit 1, the message, the database left usable (what it stored is kept for a
# rerun). SIGTERM stops it the same way, with the interrupt's message.
long=(--device cpu --model cnn --batches 8,16,32 --min-reps 1000 --max-reps 1000 --warmup 1 --no-comm --db limit.db)
"$bin" calib "${long[@]}" --time-limit 0.5s > out.txt 2> err.txt
[ $? -eq 1 ] || fail "calib --time-limit exit status (want 1): $(cat err.txt)"
grep -q "stopped at --time-limit 0.5 s; the points stored so far are kept, rerun the same command to resume" err.txt ||
  fail "calib --time-limit message: $(cat err.txt)"
sqlite3 limit.db "PRAGMA integrity_check" | grep -qx ok || fail "calib --time-limit left the database damaged"
"$bin" calib "${long[@]}" > out.txt 2> err.txt &
pid=$!
sleep 2 # past its start-up (the handler is installed before the sweep, which takes about 8 s here)
kill -TERM $pid
wait $pid
[ $? -eq 1 ] || fail "calib after SIGTERM exit status (want 1): $(cat err.txt)"
grep -q "interrupted" err.txt || fail "calib after SIGTERM message: $(cat err.txt)"

# Bad input: exit 2, clear message, nothing written.
expect2() { # pattern, args...
  local pat=$1; shift
  "$bin" calib "$@" --db bad.db > /dev/null 2> err.txt
  local rc=$?
  [ $rc -eq 2 ] || fail "calib $* exit $rc (want 2)"
  grep -q -- "$pat" err.txt || fail "calib $*: message $(cat err.txt)"
}
expect2 'unknown model "nosuch"' --device cpu --model nosuch
expect2 'expected positive integers' --device cpu --batches 8,x,32
expect2 'need at least 3 batch sizes' --device cpu --batches 8,16
expect2 'given twice' --device cpu --batches 8,16,16
expect2 'expected cpu, cuda:I or cuda:I/sm=N, got "gpu0"' --device gpu0
expect2 'expected cpu, cuda:I or cuda:I/sm=N' --device cuda:0/sm=0
expect2 '--pin: expected auto or none, got "always"' --device cpu --pin always
expect2 '--device cpu|cuda:I|cuda:I/sm=N is required'
expect2 '--time-limit: expected a time from 0 to 30 days like "10m" or "90s", got "soon"' --device cpu --time-limit soon
expect2 '--time-limit: expected a time' --device cpu --time-limit -5s
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi > /dev/null 2>&1; then
  expect2 'cuda:0' --device cuda:0 --model mlp
fi
[ ! -e bad.db ] || fail "bad input created the database"

if [ $fails -gt 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
