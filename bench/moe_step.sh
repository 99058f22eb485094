#!/usr/bin/env bash
# Mixture-of-experts training (see moe_step.py): one step of an MoE GPT, dtrun vs PyTorch (CPU,
# same threads, model, batch, optimizer, data), then the all-to-alls of expert parallelism under
# mpirun on 2 and 4 processes, predicted against measured.
# Usage: bench/moe_step.sh [BUILD] [THREADS] [extra flags for moe_step.py, e.g. --procs 2]
set -euo pipefail
BUILD=${1:-build}
THREADS=${2:-$(nproc)}
shift $(( $# > 2 ? 2 : $# ))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/moe_step.py" --build "$ROOT/$BUILD" --threads "$THREADS" "$@"
