#!/usr/bin/env bash
# Where GPT-2 124M's training step spends its time on one GPU: dtrun --profile-summary for the
# bf16 and fp32 plans of tests/gpu/prepare.sh (each kernel waited for on the device), and
# PyTorch eager bf16's step by CUDA kernel from its profiler, side by side.
# Usage: bench/gpu_profile.sh [BUILD_DIR] (on the GPU machine, after tests/gpu/run.sh unpacked
# or built the runtime there).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
# shellcheck disable=SC1091
if [ -f "$BUILD/env.sh" ]; then source "$BUILD/env.sh"; fi
TOKENS="$ROOT/gpu-carry/gpt2-tokens.bin"  # tests/gpu/prepare.sh
for precision in bf16 fp32; do
  echo "==== dtrun GPT-2 124M $precision, batch 8 x 1024"
  "$BUILD/tools/dtrun/dtrun" "$ROOT/gpu-carry/gpt2-$precision.dtp" --data "$TOKENS" --device cuda \
    --steps 4 --profile-summary | sed -n '/^profile of/,$p'
done
echo "==== PyTorch"
python3 "$ROOT/bench/gpu_gpt2.py" --build "$BUILD" --plans "$ROOT/gpu-carry" --torch-profile 30
