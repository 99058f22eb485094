#!/usr/bin/env bash
# How dtc compile's time and memory grow with a model's depth: GPT-mini at 100..800 layers
# (AdamW, one device and dp=2). Prints seconds and peak RSS per depth and the ratio to the
# previous depth; linear growth shows as ratios near 2. Usage: bench/compile_depth.sh [BUILD]
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DTC="$ROOT/$BUILD/tools/dtc/dtc"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf "%-6s %-6s %9s %6s %10s %6s\n" layers mesh seconds ratio "peak MiB" ratio
for mesh in none dp=2; do
  previous_s="" previous_m=""
  for layers in 100 200 400 800; do
    "$DTC" zoo gpt --layers "$layers" --vocab 64 --ctx 16 --embd 32 --heads 2 -o "$WORK/g.dtm"
    flags=(--batch 2 --optimizer adamw)
    [ "$mesh" != none ] && flags+=(--mesh "$mesh")
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$DTC" compile "$WORK/g.dtm" -o "$WORK/g.dtp" "${flags[@]}"
    read -r seconds kib < "$WORK/time"
    mib=$((kib / 1024))
    ratio_s=$([ -n "$previous_s" ] && awk "BEGIN{printf \"%.2f\", $seconds/$previous_s}" || echo -)
    ratio_m=$([ -n "$previous_m" ] && awk "BEGIN{printf \"%.2f\", $mib/$previous_m}" || echo -)
    printf "%-6s %-6s %9s %6s %10s %6s\n" "$layers" "$mesh" "$seconds" "$ratio_s" "$mib" "$ratio_m"
    previous_s=$seconds previous_m=$mib
  done
done
