#!/usr/bin/env bash
# dtc explore's predictions against measured steps on this machine (calibrated first).
# Usage: bench/explore_accuracy.sh [BUILD] [PROCESSES] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
PROCS=${2:-2}
ROUNDS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/explore_accuracy.py" --build "$ROOT/$BUILD" --devices "$PROCS" --rounds "$ROUNDS"
