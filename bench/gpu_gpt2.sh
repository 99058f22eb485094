#!/usr/bin/env bash
# GPT-2 124M on one GPU: dtrun vs PyTorch eager vs torch.compile, interleaved rounds (see
# gpu_gpt2.py). Needs the runtime built with CUDA (tests/gpu/run.sh builds build-gpu) and
# gpu-carry/gpt2-{bf16,fp32}.dtp from tests/gpu/prepare.sh.
# Usage: bench/gpu_gpt2.sh [BUILD_DIR] [--sizes 124M,350M] [--rounds 3] [--variants]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then BUILD=$1; shift; fi
# A runtime unpacked from gpu-carry/bundle.tar.xz (tests/gpu/run.sh does that) brings its
# library path with it.
# shellcheck disable=SC1091
if [ -f "$BUILD/env.sh" ]; then source "$BUILD/env.sh"; fi
exec python3 "$ROOT/bench/gpu_gpt2.py" --build "$BUILD" --plans "$ROOT/gpu-carry" "$@"
