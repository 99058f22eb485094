#!/usr/bin/env bash
# A data-parallel training step, dtrun on MPI vs PyTorch DDP (see dp_step.py). Prints ms/step and
# the ratio (PyTorch time / dtrun time). Usage: bench/dp_step.sh [BUILD] [PROCS] [BATCH]
set -euo pipefail
BUILD=${1:-build}
PROCS=${2:-2}
BATCH=${3:-256}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/dp_step.py" --build "$ROOT/$BUILD" --procs "$PROCS" --batch "$BATCH"
