#!/usr/bin/env bash
# Llama 3.2 1B and 3B on one GPU: dtrun vs a PyTorch Llama in eager mode and under torch.compile,
# interleaved rounds (see gpu_llama.py). Needs the runtime built with CUDA (tests/gpu/run.sh
# unpacks it into build-gpu) and gpu-carry/llama-*.dtp from tests/gpu/prepare.sh.
# Usage: bench/gpu_llama.sh [BUILD_DIR] [--models 1B,3B] [--contexts 2048,4096,8192] [--rounds 3]
#                           [--precision bf16,fp8,fp8-delayed] [--peers eager,compile]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then BUILD=$1; shift; fi
# shellcheck disable=SC1091
if [ -f "$BUILD/env.sh" ]; then source "$BUILD/env.sh"; fi
exec python3 "$ROOT/bench/gpu_llama.py" --build "$BUILD" --plans "$ROOT/gpu-carry" "$@"
