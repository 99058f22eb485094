#!/usr/bin/env bash
# Megatron-LM's published results (Narayanan et al., SC'21, Table 1; Korthikanti et al.,
# MLSys 2023, Tables 3 and 5) beside dtc explore's predictions of their layouts and explore's own
# picks (bench/megatron_table.py).
# Usage: bench/megatron_table.sh [BUILD] [ROW ...]   (rows: 1.7B 3.6B 7.5B 18B 39B 76B 145B 310B
# 530B 1T, 22B-sel 175B-sel 530B-sel 1T-sel, 22B-full 175B-full 530B-full 1T-full; default all,
# about ten minutes on two cores)
set -euo pipefail
BUILD=${1:-build}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec python3 "$ROOT/bench/megatron_table.py" "$ROOT/$BUILD/tools/dtc/dtc" "$@"
