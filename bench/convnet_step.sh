#!/usr/bin/env bash
# One ConvNet training step, dtrun vs PyTorch (CPU). Usage: bench/convnet_step.sh [BUILD] [THREADS]
set -euo pipefail
BUILD=${1:-build}
THREADS=${2:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/convnet_step.py" --build "$ROOT/$BUILD" --threads "$THREADS"
