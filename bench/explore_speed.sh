#!/usr/bin/env bash
# How long dtc explore takes: GPT-2 124M over 8 devices (h100-80g) at several batch sizes, with
# the candidates it built, against the 5-second goal; and one GPT-3 175B layout (bf16,
# pp=8 x dp=16 x tp=8, 8 micro-batches) through dtc compile, the unit a 1024-device exploration
# repeats (explore's own candidates skip the per-pass verification, about a third faster).
# Usage: bench/explore_speed.sh [BUILD]
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DTC="$ROOT/$BUILD/tools/dtc/dtc"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$DTC" zoo gpt --vocab 50257 --ctx 1024 --layers 12 --heads 12 --embd 768 --seed 0 -o "$WORK/gpt2.dtm"
echo "dtc explore, GPT-2 124M over 8 devices on h100-80g ($(nproc) cores; goal: under 5 s)"
printf "  %-6s %10s %s\n" batch seconds candidates
for batch in 8 16 64; do
  /usr/bin/time -f "%e" -o "$WORK/time" "$DTC" explore "$WORK/gpt2.dtm" --devices 8 \
    --batch "$batch" --profile h100-80g --top 1 > "$WORK/out"
  printf "  %-6s %10s %s\n" "$batch" "$(cat "$WORK/time")" \
    "$(grep -o '[0-9]* candidates, [0-9]* built' "$WORK/out")"
done
"$DTC" explore "$WORK/gpt2.dtm" --devices 8 --batch 64 --profile h100-80g --json > "$WORK/out.json"
/usr/bin/python3 - "$WORK/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
built = sorted((c for c in r["candidates"] if c["built"]), key=lambda c: -c["build_s"])
total = sum(c["build_s"] for c in built)
print(f"  batch 64: {total:.1f} s of compiling over {r['threads']} threads; the slowest:")
for c in built[:3]:
    print(f"    {c['build_s']:5.2f} s  {' '.join(c['layout_flags'])}")
PY
"$DTC" zoo gpt --vocab 51200 --ctx 2048 --layers 96 --heads 96 --embd 12288 --seed 0 \
  -o "$WORK/gpt3.dtm"
/usr/bin/time -f "%e" -o "$WORK/time" "$DTC" compile "$WORK/gpt3.dtm" -o "$WORK/gpt3.dtp" \
  --batch 1536 --device cuda --precision bf16 --mesh pp=8,dp=16,tp=8 --microbatches 8 > /dev/null
echo "one GPT-3 175B candidate (pp=8, dp=16, tp=8, 8 micro-batches, bf16): $(cat "$WORK/time") s"
