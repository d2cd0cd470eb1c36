#!/usr/bin/env bash
# Checks notebooks-data/papers/run.sh (the papers' comparisons of docs/papers.md) in its quick
# mode: it runs, exits 0, and writes every row of results.csv and results.md with a value in
# each of our columns. The numbers themselves are not checked (quick runs are a few updates).
# Usage: cli_papers.sh HETSIM SOURCE_DIR
set -u
. "$(dirname "$0")/cli-lib.sh"
cli_setup "$@"
CHECK_TERSE=1
H=$HETSIM T=$TMP # the short names this script uses

fashion_mnist_or_synthetic # the proxy rows train mlp

bash "$SRC/notebooks-data/papers/run.sh" "$H" "$T/out" --quick >"$T/log" 2>&1
rc=$?
check run_exit_0 test "$rc" = 0
[ "$rc" = 0 ] || head -c 2000 "$T/log"
for f in results.csv results.md commands.txt; do check "writes_$f" test -s "$T/out/$f"; done

ids="lbb_epoch lbb_step lbb_batches lbb_tta lbcal_epoch lbcal_acc lbcal_acc_time ashl_mlp ashl_mlp_bsp
     ashl_resnet18 ashl_resnet18_bsp ashl_mlp_proxy ashl_mlp_proxy_bsp alloc_members alloc_slow"
for id in $ids; do
  check "csv_row_$id" python3 - "$T/out/results.csv" "$id" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["id"] == sys.argv[2]]
assert len(rows) == 1, rows
r = rows[0]
for k in ("baseline", "baseline_value", "policy", "policy_value", "published"):
    assert r[k], (k, r)
PY
  check "md_row_$id" grep -q "^| $id |" "$T/out/results.md"
done
check csv_no_extra_rows test "$(tail -n +2 "$T/out/results.csv" | wc -l)" = "$(echo $ids | wc -w)"
check md_says_quick grep -q "Quick run" "$T/out/results.md"
# every run of the script is listed with its command
check commands_listed test "$(grep -c ': hetsim sim ' "$T/out/commands.txt")" = 22
# bad usage
bash "$SRC/notebooks-data/papers/run.sh" >/dev/null 2>&1
check no_args_exit_2 test $? = 2
bash "$SRC/notebooks-data/papers/run.sh" "$T/nope" "$T/x" --quick >/dev/null 2>&1
check bad_binary_exit_2 test $? = 2

cli_finish
