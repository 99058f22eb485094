#!/usr/bin/env bash
# Memory for big models: ZeRO 0-3 on PROCS ranks and --recompute none/full/selective on one
# device, per-rank plan and measured peaks as ratios, beside torch.utils.checkpoint (see
# memory.py). Usage: bench/memory.sh [BUILD] [PROCS] [LAYERS] [WIDTH]
set -euo pipefail
BUILD=${1:-build}
PROCS=${2:-4}
LAYERS=${3:-8}
WIDTH=${4:-512}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/memory.py" --build "$ROOT/$BUILD" --procs "$PROCS" --layers "$LAYERS" \
  --embd "$WIDTH"
