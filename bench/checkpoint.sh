#!/usr/bin/env bash
# Checkpoint write/read throughput of the GPT-2 124M training state: dtrun (1 rank, dp=2) against
# dd on the same bytes and torch.save/torch.load of the same tensors (see checkpoint.py).
# Usage: bench/checkpoint.sh [BUILD] [DIR]   (DIR: where to write, default BUILD/bench-checkpoint)
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${2:-$ROOT/$BUILD/bench-checkpoint}
exec /usr/bin/python3 "$ROOT/bench/checkpoint.py" --build "$ROOT/$BUILD" --dir "$DIR"
