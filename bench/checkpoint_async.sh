#!/usr/bin/env bash
# What a checkpoint costs training (GPT-2 124M, AdamW, CPU): synchronous against
# --checkpoint-async, each against the run without checkpoints (see checkpoint_async.py).
# Usage: bench/checkpoint_async.sh [BUILD] [DIR] [ROUNDS] [THREADS]
#   (DIR: where to write, default BUILD/bench-checkpoint; ROUNDS: of each mode, default 2;
#   THREADS: training threads, default every core and then one fewer)
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${2:-$ROOT/$BUILD/bench-checkpoint}
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/checkpoint_async.py" --build "$ROOT/$BUILD" --dir "$DIR" --rounds "${3:-2}" ${4:+--threads $4}
