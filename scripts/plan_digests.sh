#!/usr/bin/env bash
# The carried set: plans of every strategy on several model families, and explore's ranking,
# compiled by one build and reduced to digests, so a change that must keep behaviour (a
# refactor) is checked by diffing two runs' outputs:
#   scripts/plan_digests.sh build /tmp/before   # on the old tree
#   scripts/plan_digests.sh build /tmp/after    # on the new one
#   diff /tmp/before/digests.txt /tmp/after/digests.txt
# Each line is a plan's name and the sha256 of its file (explore: of its JSON without the
# wall-clock fields). The plans stay in OUT for `dtc inspect` when two differ.
set -euo pipefail
BUILD=${1:?usage: plan_digests.sh BUILD OUT}
OUT=${2:?usage: plan_digests.sh BUILD OUT}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DTC="$ROOT/$BUILD/tools/dtc/dtc"
[ -x "$DTC" ] || DTC="$(cd "$BUILD" && pwd)/tools/dtc/dtc"
mkdir -p "$OUT/models" "$OUT/plans"
OUT=$(cd "$OUT" && pwd)
# Relative model paths: explore's JSON names the model, and two runs' folders differ.
cd "$OUT"
M=models

"$DTC" zoo mlp -o "$M/mlp.dtm"
"$DTC" zoo convnet -o "$M/convnet.dtm"
"$DTC" zoo gpt --vocab 256 --ctx 64 --layers 2 -o "$M/gpt.dtm"
"$DTC" zoo gpt --vocab 1001 --ctx 48 --layers 3 --heads 6 --embd 96 --layout hf -o "$M/gpt-hf.dtm"
"$DTC" zoo gpt --vocab 256 --ctx 32 --layers 2 --experts 4 -o "$M/gpt-moe.dtm"
"$DTC" zoo llama --vocab 512 --ctx 64 --layers 2 --heads 8 --kv-heads 2 --embd 128 -o "$M/llama.dtm"
"$DTC" zoo llama --vocab 300 --ctx 32 --layers 3 --heads 4 --kv-heads 4 --embd 64 --experts 4 \
  --router-score sigmoid -o "$M/llama-moe.dtm"

: > "$OUT/digests.txt"
plan() {  # NAME MODEL FLAGS...
  local name=$1 model=$2
  shift 2
  if ! "$DTC" compile "$M/$model" -o "$OUT/plans/$name.dtp" "$@" \
      > "$OUT/plans/$name.log" 2>&1; then
    echo "$name: compile failed: $(tail -1 "$OUT/plans/$name.log")" >&2
    echo "$name FAILED" >> "$OUT/digests.txt"
    return
  fi
  echo "$name $(sha256sum < "$OUT/plans/$name.dtp" | cut -d' ' -f1)" >> "$OUT/digests.txt"
}

plan mlp-sgd mlp.dtm --batch 32
plan mlp-adamw-dp2-zero3 mlp.dtm --batch 32 --optimizer adamw --mesh dp=2 --zero 3
plan mlp-pp2 mlp.dtm --batch 32 --mesh pp=2 --microbatches 4
plan convnet convnet.dtm --batch 8
plan convnet-dp2 convnet.dtm --batch 8 --mesh dp=2
plan gpt gpt.dtm --batch 8 --optimizer adamw --clip-grad-norm 1
plan gpt-dp2-zero1 gpt.dtm --batch 8 --optimizer adamw --mesh dp=2 --zero 1
plan gpt-dp2-zero2 gpt.dtm --batch 8 --optimizer adamw --mesh dp=2 --zero 2
plan gpt-tp2-sp gpt.dtm --batch 8 --mesh tp=2 --sequence-parallel
plan gpt-dp2-tp2-recompute gpt.dtm --batch 8 --mesh dp=2,tp=2 --recompute full
plan gpt-pp2-1f1b gpt.dtm --batch 8 --mesh pp=2 --microbatches 4
plan gpt-pp2-interleaved gpt.dtm --batch 8 --mesh pp=2 --microbatches 4 --schedule interleaved \
  --virtual-stages 2
plan gpt-dp2-tp2-pp2 gpt.dtm --batch 8 --mesh dp=2,tp=2,pp=2 --microbatches 2
plan gpt-cp2-ring gpt.dtm --batch 4 --mesh cp=2 --cp-attention ring
plan gpt-bf16 gpt.dtm --batch 8 --precision bf16 --optimizer adamw
plan gpt-fp16 gpt.dtm --batch 8 --precision fp16
plan gpt-cuda-bf16 gpt.dtm --batch 8 --precision bf16 --device cuda --optimizer adamw
plan gpt-accumulate gpt.dtm --batch 8 --accumulate 2 --recompute selective
plan gpt-hf-tp3 gpt-hf.dtm --batch 6 --mesh tp=3 --no-vocab-parallel
plan gpt-hf-dp3-cp2-ulysses gpt-hf.dtm --batch 6 --mesh dp=3,cp=2 --cp-attention ulysses \
  --no-cp-load-balance
plan gpt-moe-ep2 gpt-moe.dtm --batch 8 --mesh ep=2
plan gpt-moe-dp2 gpt-moe.dtm --batch 8 --mesh dp=2 --optimizer adamw
plan llama llama.dtm --batch 4 --optimizer adamw
plan llama-tp2-sp llama.dtm --batch 4 --mesh tp=2 --sequence-parallel --recompute full
plan llama-tp4 llama.dtm --batch 4 --mesh tp=4
plan llama-cp2-tp2-ring llama.dtm --batch 2 --mesh cp=2,tp=2 --cp-attention ring \
  --sequence-parallel --precision bf16
plan llama-cp2-allgather llama.dtm --batch 2 --mesh cp=2
plan llama-cuda-bf16 llama.dtm --batch 4 --device cuda --precision bf16 --optimizer adamw
plan llama-pp2-dp2 llama.dtm --batch 4 --mesh dp=2,pp=2 --microbatches 2 --zero 1
plan llama-moe-ep2-dp2 llama-moe.dtm --batch 4 --mesh dp=2,ep=2
plan llama-moe-tp2 llama-moe.dtm --batch 4 --mesh tp=2

inspect() {  # PLAN PROFILE: the plan's predicted step on a shipped profile
  local plan=$1 profile=$2
  if ! "$DTC" inspect "$OUT/plans/$plan.dtp" --json --profile "$profile" \
      > "$OUT/plans/$plan.$profile.json" 2>&1; then
    echo "inspect $plan $profile FAILED" >> "$OUT/digests.txt"
    return
  fi
  echo "inspect-$plan-$profile $(sha256sum < "$OUT/plans/$plan.$profile.json" | cut -d' ' -f1)" \
    >> "$OUT/digests.txt"
}

for p in gpt-cuda-bf16 llama-cuda-bf16; do
  for profile in h100-measured a100-80g; do inspect "$p" "$profile"; done
done
for p in gpt llama-tp2-sp gpt-moe-ep2 llama-pp2-dp2; do inspect "$p" cpu; done

explore() {  # NAME MODEL FLAGS...
  local name=$1 model=$2
  shift 2
  if ! "$DTC" explore "$M/$model" --json "$@" > "$OUT/plans/$name.json" \
      2> "$OUT/plans/$name.log"; then
    echo "$name: explore failed: $(tail -1 "$OUT/plans/$name.log")" >&2
    echo "$name FAILED" >> "$OUT/digests.txt"
    return
  fi
  local digest
  digest=$(python3 - "$OUT/plans/$name.json" <<'EOF'
import hashlib, json, sys
CLOCK = {"explore_s", "build_s", "threads"}
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in CLOCK}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
data = strip(json.load(open(sys.argv[1])))
print(hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest())
EOF
)
  echo "$name $digest" >> "$OUT/digests.txt"
}

explore explore-gpt-8 gpt-hf.dtm --devices 8 --batch 12 --profile h100-80g --top 1000
explore explore-llama-8 llama.dtm --devices 8 --batch 8 --profile h100-80g --top 1000
explore explore-llama-moe-estimate llama-moe.dtm --devices 16 --batch 16 --profile h100-80g \
  --estimate --top 1000

echo "$(grep -vc FAILED "$OUT/digests.txt") digests in $OUT/digests.txt"
