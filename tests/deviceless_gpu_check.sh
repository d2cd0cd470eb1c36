#!/usr/bin/env bash
# tools/gpu-check.sh without a GPU (label deviceless): a bundle assembled from this build by
# tools/gpu-build.sh --no-build holds everything the GPU steps need (the dry run lists every step
# and says so), a bundle missing a program is caught, the options are checked, and a real run
# here records each failing step and still runs the next, skips steps once the budget is spent,
# runs them with --resume and packs the results, tools/gpu-device-run.sh does the same from an
# archive, and steps that find no GPU at all are recorded as skipped. Nothing here needs a GPU; the run's steps fail or skip for want of one.
# Usage: bash tests/deviceless_gpu_check.sh SOURCE_DIR BUILD_DIR
set -u
SRC=${1:?usage: deviceless_gpu_check.sh SOURCE_DIR BUILD_DIR}
BUILD=${2:?usage: deviceless_gpu_check.sh SOURCE_DIR BUILD_DIR}
. "$SRC/tests/cli-lib.sh"
cli_setup "$BUILD/hetsim" "$SRC"
CHECK_PREFIX=gpu_check.

for p in hetsim test_gpu_nn test_deviceless_cudnn bench_gpu_nn; do
  [ -x "$BUILD/$p" ] || { echo "$BUILD/$p is not built (a build without CUDA?): skipped"; exit 77; }
done
command -v timeout >/dev/null || { echo "timeout is needed: skipped"; exit 77; }

B="$TMP/bundle"
if bash "$SRC/tools/gpu-build.sh" "$BUILD" --no-build --out "$B" --no-tar >"$TMP/build.out" 2>&1; then
  ok assemble
else
  bad assemble "$(tail -3 "$TMP/build.out")"
fi

# 1. The dry run: every step listed with what it runs, nothing missing.
bash "$B/gpu-check.sh" --dry-run >"$TMP/dry" 2>&1
rc=$?
check dry_run_exit_0 test "$rc" = 0 || tail -5 "$TMP/dry"
n_steps=$(bash "$B/gpu-check.sh" --list | wc -l)
check ten_steps test "$n_steps" = 10
all_listed=1
while read -r s; do
  grep -q "^step $s\$" "$TMP/dry" || all_listed=0
done < <(bash "$B/gpu-check.sh" --list)
check dry_run_lists_steps test "$all_listed" = 1
check dry_run_says_complete grep -q 'the bundle holds everything' "$TMP/dry"
check dry_run_no_missing test "$(grep -c MISSING "$TMP/dry")" = 0
check dry_run_starts_hetsim grep -q '^ok      hetsim doctor runs' "$TMP/dry"
check dry_run_version grep -q '^ok      VERSION' "$TMP/dry"
check dry_run_carries_h100_json test -f "$B/tests/data/cudnn-h100-sxm5.json"

# 2. A bundle without a program the steps need.
rm "$B/tests/test_gpu_nn"
bash "$B/gpu-check.sh" --dry-run >"$TMP/dry2" 2>&1
rc=$?
check dry_run_missing_exit_1 test "$rc" = 1
check dry_run_names_missing grep -q 'MISSING tests/test_gpu_nn' "$TMP/dry2"
bash "$B/gpu-check.sh" --dry-run --step doctor >"$TMP/dry3" 2>&1
check dry_run_one_step test $? = 0
check dry_run_one_step_only test "$(grep -c '^step ' "$TMP/dry3")" = 1
bash "$B/gpu-check.sh" --dry-run --from calib-whole >"$TMP/dry4" 2>&1
check dry_run_from test "$(grep '^step ' "$TMP/dry4" | head -1)" = "step calib-whole"

# 3. Usage.
expect_exit usage_bad_step 2 bash "$B/gpu-check.sh" --step nosuch
expect_exit usage_step_and_from 2 bash "$B/gpu-check.sh" --step doctor --from local
expect_exit usage_bad_limit 2 bash "$B/gpu-check.sh" --step-limit 0
expect_exit usage_unknown 2 bash "$B/gpu-check.sh" --frobnicate
expect_exit usage_bad_models 2 bash "$B/gpu-check.sh" --models "mlp cnn"
bash "$B/gpu-check.sh" --dry-run --models mlp,cnn --step calib-whole --step local >"$TMP/dry6" 2>&1
check dry_run_models grep -q -- '--model mlp --comm-world 3 .* then --model cnn --no-comm' "$TMP/dry6"

# 4. A run here: doctor cannot record the device properties (no GPU), so its step fails; the
# deviceless step, which needs that file, fails too, yet runs; both are in the summary.
bash "$B/gpu-check.sh" --step doctor --step deviceless --out "$TMP/res" --budget 300 >"$TMP/run" 2>&1
rc=$?
check run_exit_1 test "$rc" = 1
S="$TMP/res/summary.tsv"
check summary_header test "$(head -1 "$S")" = "$(printf 'step\tstatus\texit\tseconds\tnote')"
check doctor_failed_recorded test "$(awk -F'\t' '$1 == "doctor" {print $2}' "$S")" = failed
check doctor_note test -n "$(awk -F'\t' '$1 == "doctor" && $5 ~ /cudnn-deviceprop/' "$S")"
check next_step_ran test "$(awk -F'\t' '$1 == "deviceless" {print $2}' "$S")" = failed
check deviceless_says_why grep -q 'no cudnn-deviceprop.json' "$TMP/res/logs/deviceless.log"
check doctor_json_kept python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/res/doctor.json"

# 5. Out of budget: steps that would start with under 30 s left are recorded as skipped.
bash "$B/gpu-check.sh" --from agreement --out "$TMP/res2" --budget 20 >"$TMP/run2" 2>&1
rc=$?
check budget_exit_0 test "$rc" = 0
S2="$TMP/res2/summary.tsv"
check budget_skipped test "$(awk -F'\t' 'NR > 1 && $2 == "skipped" && $5 ~ /out of time/' "$S2" | wc -l)" = 2

# 6. --resume runs what the budget cut off, packs the results after each step, and a second
# --resume runs nothing.
bash "$B/gpu-check.sh" --resume --from agreement --out "$TMP/res2" --pack "$TMP/back/gpu.tar.gz" >"$TMP/run3" 2>&1
check resume_ran_both test "$(grep -c '^step [a-z]* (at most' "$TMP/run3")" = 2
check resume_rows_appended test "$(awk -F'\t' 'NR > 1' "$S2" | wc -l)" = 4
check resume_last_rows_not_time test "$(tail -2 "$S2" | awk -F'\t' '$5 ~ /out of time/' | wc -l)" = 0
check pack_written tar -tzf "$TMP/back/gpu.tar.gz" res2/summary.tsv res2/logs/nccl.log
check pack_no_part test ! -e "$TMP/back/gpu.tar.gz.part"
bash "$B/gpu-check.sh" --resume --from agreement --out "$TMP/res2" >"$TMP/run4" 2>&1
check resume_again_exit_0 test $? = 0 # (the steps' failures are not run again)
check resume_again_nothing test "$(grep -c 'done before' "$TMP/run4")" = 2
check resume_again_no_rows test "$(awk -F'\t' 'NR > 1' "$S2" | wc -l)" = 4
# A step whose last row is partial (a calibration stopped at its time limit, what it measured
# stored) runs again under --resume; the others stay done.
printf 'agreement\tpartial\t75\t10\tstopped at its time limit\n' >>"$S2"
bash "$B/gpu-check.sh" --resume --from agreement --out "$TMP/res2" >"$TMP/run6" 2>&1
check resume_partial_again grep -q '^step agreement (at most' "$TMP/run6"
check resume_partial_only test "$(grep -c 'done before' "$TMP/run6")" = 1
check dry_run_limits grep -q '^  limit: 240s' "$TMP/dry"
bash "$B/gpu-check.sh" --dry-run --step-limit 45 --step doctor >"$TMP/dry5" 2>&1
check dry_run_step_limit grep -q '^  limit: 45s' "$TMP/dry5"
expect_exit usage_pack_inside 2 bash "$B/gpu-check.sh" --step doctor --out "$TMP/res3" --pack "$TMP/res3/x.tar.gz"
expect_exit usage_resume_and_step 2 bash "$B/gpu-check.sh" --resume --step doctor

# 7. tools/gpu-device-run.sh, as the device tool runs it: the archive unpacked afresh, gpu-env.sh
# sourced (under set -u), the results under the work folder and back in $OUT.
tar -C "$TMP" --transform "s,^bundle,hetsim-gpu-bundle," -czf "$TMP/bundle.tar.gz" bundle
mkdir -p "$TMP/devout"
OUT="$TMP/devout" HETSIM_GPU_WORK="$TMP/work" HETSIM_GPU_BUNDLE="$TMP/bundle.tar.gz" \
  bash "$SRC/tools/gpu-device-run.sh" --card testcard --step agreement --step nccl >"$TMP/dev1" 2>&1
check device_run_exit test $? = 1 || tail -3 "$TMP/dev1" # agreement fails: the bundle's test_gpu_nn was removed in 2.
check device_run_summary test "$(awk -F'\t' 'NR > 1' "$TMP/devout/summary.tsv" | wc -l)" = 2
check device_run_pack tar -tzf "$TMP/devout/gpu-check.tar.gz" gpu-testcard/summary.tsv
check device_run_results_kept test -f "$TMP/work/notebooks-data/gpu-testcard/logs/nccl.log"
OUT="$TMP/devout" HETSIM_GPU_WORK="$TMP/work" HETSIM_GPU_BUNDLE="$TMP/bundle.tar.gz" \
  bash "$SRC/tools/gpu-device-run.sh" --card testcard --resume --from nccl >"$TMP/dev2" 2>&1
check device_run_resume grep -q '^step nccl: done before' "$TMP/dev2"
expect_exit device_run_no_archive 2 env HETSIM_GPU_WORK="$TMP/work" HETSIM_GPU_BUNDLE="$TMP/none.tar.xz" \
  bash "$SRC/tools/gpu-device-run.sh"

# 8. Where there is no GPU (test_gpu_probe skips), the ctest-gpu step, whose tests all skip, and
# the bench step, whose program finds no GPU, are recorded as skipped, not as ok or failed, and
# bench.jsonl holds no "no GPU" line in place of a record.
if (cd "$B" && HETSIM_SOURCE_DIR="$B" tests/test_gpu_probe >/dev/null 2>&1); [ $? = 77 ]; then
  bash "$B/gpu-check.sh" --step ctest-gpu --step bench --out "$TMP/res4" --budget 300 >"$TMP/run5" 2>&1
  check no_gpu_run_exit_0 test $? = 0
  S4="$TMP/res4/summary.tsv"
  check no_gpu_tests_skipped test "$(awk -F'\t' '$1 == "ctest-gpu" {print $2}' "$S4")" = skipped
  check no_gpu_tests_counted grep -q '^tests passed: 0, failed: 0' "$TMP/res4/logs/ctest-gpu.log"
  check no_gpu_bench_skipped test "$(awk -F'\t' '$1 == "bench" {print $2}' "$S4")" = skipped
  check no_gpu_bench_jsonl_empty test ! -s "$TMP/res4/bench.jsonl"
fi
# 9. Nothing a step started outlives it: a test program that leaves a process behind in a
# process group of its own (as an inner `timeout` makes), which the step's timeout does not
# reach, finds it ended once the step is over (each step runs in a session of its own).
if command -v setsid >/dev/null; then
  cat >"$B/tests/test_gpu_probe" <<'SH'
#!/usr/bin/env bash
timeout 300 sleep 300 >/dev/null 2>&1 &
echo $! >"$LEFT_PID"
exit 77
SH
  chmod +x "$B/tests/test_gpu_probe"
  LEFT_PID="$TMP/left.pid" bash "$B/gpu-check.sh" --step ctest-gpu --out "$TMP/res5" --budget 300 >"$TMP/run7" 2>&1
  check step_leaves_nothing test -s "$TMP/left.pid" -a ! -e "/proc/$(cat "$TMP/left.pid" 2>/dev/null || echo 0)"
  check step_sid_not_packed test ! -e "$TMP/res5/.step-sid"
fi
cli_finish
