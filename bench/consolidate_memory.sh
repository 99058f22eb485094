#!/usr/bin/env bash
# The memory of consolidating a dp=4 ZeRO-3 checkpoint of a 1.2 GB GPT into one model file, and
# PyTorch loading it (see consolidate_memory.py).
# Usage: bench/consolidate_memory.sh [BUILD] [DIR]   (DIR: where to write, default BUILD/bench-checkpoint)
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${2:-$ROOT/$BUILD/bench-checkpoint}
exec /usr/bin/python3 "$ROOT/bench/consolidate_memory.py" --build "$ROOT/$BUILD" --dir "$DIR"
