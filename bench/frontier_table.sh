#!/usr/bin/env bash
# The Llama 3 paper's 405B layouts (8,192 and 16,384 H100s, contexts 8192 and 131,072) beside
# dtc explore's predictions of them and explore's own picks, then Megatron-LM's 175B and 1T rows
# (bench/frontier_table.py; not part of `make bench`: about six minutes on two cores).
# Usage: bench/frontier_table.sh [BUILD] [ROW ...] [--no-megatron]   (rows: 8k 16k long moe)
set -euo pipefail
BUILD=${1:-build}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec python3 "$ROOT/bench/frontier_table.py" "$ROOT/$BUILD/tools/dtc/dtc" "$@"
