#!/usr/bin/env bash
# One MLP training step, dtrun vs PyTorch (CPU, same threads, same model, batch and optimizer).
# Prints milliseconds per step for each and the ratio (PyTorch time / dtrun time: >1 means dtrun
# is faster). Usage: bench/mlp_step.sh [BUILD] [THREADS] [BATCH]
set -euo pipefail
BUILD=${1:-build}
THREADS=${2:-$(nproc)}
BATCH=${3:-256}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/mlp_step.py" --build "$ROOT/$BUILD" --threads "$THREADS" --batch "$BATCH"
