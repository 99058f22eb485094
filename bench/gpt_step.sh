#!/usr/bin/env bash
# One GPT training step, dtrun vs PyTorch (CPU, same threads, model, batch, optimizer, data).
# Usage: bench/gpt_step.sh [BUILD] [THREADS] [extra flags for gpt_step.py, e.g. --batch 8]
set -euo pipefail
BUILD=${1:-build}
THREADS=${2:-$(nproc)}
shift $(( $# > 2 ? 2 : $# ))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/gpt_step.py" --build "$ROOT/$BUILD" --threads "$THREADS" "$@"
