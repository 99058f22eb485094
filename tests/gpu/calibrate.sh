#!/usr/bin/env bash
# On the GPU machine: measures the GPU as a device profile with dtrun's own kernels
# (dtrun --calibrate --device cuda) and times the GPT-2 124M plans of tests/gpu/prepare.sh, so
# `dtc inspect PLAN --profile PROFILE.json` can be set beside the measured steps where dtc
# builds. Writes OUT/profile.json and OUT/measured.txt (plan, median step seconds).
# Usage: tests/gpu/calibrate.sh [BUILD_DIR] [OUT]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build-gpu}"
OUT="${2:-${OUT:-$ROOT/out/gpu}}"
mkdir -p "$OUT"
# shellcheck disable=SC1091
if [ -f "$BUILD/env.sh" ]; then source "$BUILD/env.sh"; fi
DTRUN="$BUILD/tools/dtrun/dtrun"
"$DTRUN" --calibrate --device cuda -o "$OUT/profile.json" --name "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-')"
TOKENS="$ROOT/gpu-carry/gpt2-tokens.bin"  # tests/gpu/prepare.sh
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
: > "$OUT/measured.txt"
for plan in gpt2-bf16 gpt2-fp32 gpt2-bf16-unfused-attention; do
  "$DTRUN" "$ROOT/gpu-carry/$plan.dtp" --data "$TOKENS" --device cuda --steps 15 \
    --log "$WORK/$plan.jsonl" > /dev/null
  python3 - "$WORK/$plan.jsonl" "$plan" >> "$OUT/measured.txt" <<'PY'
import json, statistics, sys
rates = [json.loads(line)["samples_per_s"] for line in open(sys.argv[1])][5:]
print(sys.argv[2], 8 / statistics.median(rates))  # batch 8: seconds per step
PY
done
cat "$OUT/measured.txt"
