#!/usr/bin/env bash
# The GEMM-bound GPT (width 768, 4 layers, context 256, batch 8): dtrun, PyTorch and JAX, with
# MFU against the sgemm peaks measured in the same run (bench/gpt_gemm_bound.py).
# Usage: bench/gpt_gemm_bound.sh [BUILD_DIR] [THREADS]
set -euo pipefail
BUILD=${1:-build}
THREADS=${2:-$(nproc)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/gpt_gemm_bound.py" --build "$ROOT/$BUILD" --threads "$THREADS"
