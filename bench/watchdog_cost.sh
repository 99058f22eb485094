#!/usr/bin/env bash
# What the watchdog's look at other hosts costs a training step (see watchdog_cost.py).
# Usage: bench/watchdog_cost.sh [BUILD] [PROCS] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
PROCS=${2:-8}
ROUNDS=${3:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/watchdog_cost.py" --build "$ROOT/$BUILD" --procs "$PROCS" --rounds "$ROUNDS"
