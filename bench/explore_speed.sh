#!/usr/bin/env bash
# How long dtc explore takes: GPT-2 124M over 8 devices (h100-80g) at several batch sizes, with
# the candidates it built, against the 5-second goal; one GPT-3 175B layout (bf16,
# pp=8 x dp=16 x tp=8, 8 micro-batches) through dtc compile; and GPT-3 175B over 1024 devices
# and a 1T-parameter GPT (Megatron-LM's 128 layers, width 25600) over 3072, estimated from
# shallow copies (goals: 60 s and 120 s).
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
# Megatron-LM's configurations: vocabulary 51,200, sequence 2048, AdamW, bf16 on A100s. Their
# paper (Narayanan et al., SC'21) states in its abstract a 1T-parameter model on 3072 GPUs at 52%
# of the theoretical peak; explore's pick is printed with its predicted share of peak beside it.
for model in "gpt3 96 96 12288 1024 1536 60" "gpt1t 128 160 25600 3072 3072 120"; do
  read -r name layers heads embd devices batch goal <<< "$model"
  [ -f "$WORK/$name.dtm" ] || "$DTC" zoo gpt --vocab 51200 --ctx 2048 --layers "$layers" \
    --heads "$heads" --embd "$embd" --seed 0 -o "$WORK/$name.dtm"
  /usr/bin/time -f "%e" -o "$WORK/time" "$DTC" explore "$WORK/$name.dtm" --devices "$devices" \
    --batch "$batch" --profile a100-80g --precision bf16 --optimizer adamw --json > "$WORK/out.json"
  /usr/bin/python3 - "$WORK/out.json" "$name" "$(cat "$WORK/time")" "$goal" <<'PY'
import json, sys
r, name, wall, goal = json.load(open(sys.argv[1])), sys.argv[2], float(sys.argv[3]), sys.argv[4]
built = sum(c["built"] for c in r["candidates"])
feasible = sum(c["feasible"] for c in r["candidates"])
print(f"{name} over {r['devices']} devices: {wall:.1f} s (goal: under {goal} s), "
      f"{len(r['candidates'])} candidates, {built} built, {feasible} feasible; {r['how']}")
if r["best"] is not None:
    c = r["candidates"][r["best"]]
    f = c["layout_flags"]
    cut = f.index("--stage-cuts") if "--stage-cuts" in f else len(f)
    flags = " ".join(f[:cut] + f[cut + 2:])
    print(f"  pick: {flags}: {c['predicted_step_s']:.1f} s a step, "
          f"{c['memory_per_rank_bytes'] / 2**30:.1f} GiB per rank, MFU {100 * c['mfu']:.1f}%")
PY
done
echo "Megatron-LM, 1T parameters on 3072 A100s (Narayanan et al., SC'21, abstract): 52% of peak"
