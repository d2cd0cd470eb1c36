#!/usr/bin/env bash
# Golden answers of `hetsim sim` (tests/golden.py): every policy on the bundled clusters and on
# the parameter-server benchmark clusters, against tests/data/golden/sim.txt. Policies off the
# shared link must be bit-identical; those on it within 1e-9 (see tests/golden.py).
# Usage: cli_golden.sh HETSIM SOURCE_DIR
set -u
HETSIM=${1:?usage: cli_golden.sh HETSIM SOURCE_DIR}
SRC=${2:?usage: cli_golden.sh HETSIM SOURCE_DIR}
PY=python3
command -v "$PY" >/dev/null || PY=/usr/bin/python3
exec "$PY" "$SRC/tests/golden.py" check "$HETSIM" "$SRC"
