#!/usr/bin/env bash
# The main job (`make demo`): the zoo MLP and ConvNet trained on Fashion-MNIST (test accuracy
# printed), then a small GPT on a byte-level text corpus (validation loss and a greedy sample).
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DTC="$ROOT/$BUILD/tools/dtc/dtc"
DTRUN="$ROOT/$BUILD/tools/dtrun/dtrun"
DATA="$ROOT/data/fashion-mnist"
OUT="$ROOT/out/demo"
mkdir -p "$OUT"

/usr/bin/python3 "$ROOT/scripts/fashion_mnist_to_npy.py" /usr/share/datasets/fashion-mnist "$DATA"

"$DTC" zoo mlp --input 784 --hidden 256,128 --classes 10 --seed 0 -o "$OUT/mlp.dtm"
"$DTC" compile "$OUT/mlp.dtm" -o "$OUT/mlp.dtp" --batch 100 --optimizer adamw --lr 1e-3 \
  --dump-ir "$OUT/ir"
"$DTC" inspect "$OUT/mlp.dtp" | head -12
echo "IR after every pass: $OUT/ir"

"$DTRUN" "$OUT/mlp.dtp" --data "$DATA/train" --steps 1200 --seed 0 \
  --eval "$DATA/test" --log "$OUT/train.jsonl" --save "$OUT/model"
echo "log: $OUT/train.jsonl; parameters: $OUT/model/model.safetensors"

# The classic ConvNet (Conv-BatchNorm-ReLU-MaxPool x2, Linear) on the same data: one epoch.
"$DTC" zoo convnet --seed 0 -o "$OUT/convnet.dtm"
"$DTC" compile "$OUT/convnet.dtm" -o "$OUT/convnet.dtp" --batch 100 --optimizer adamw --lr 2e-3
"$DTRUN" "$OUT/convnet.dtp" --data "$DATA/train" --steps 600 --seed 0 \
  --eval "$DATA/test" --log "$OUT/convnet.jsonl" --save "$OUT/convnet"

# A small GPT (nanoGPT's architecture) on a byte-level corpus of Debian's fortunes.
TOKENS="$ROOT/data/fortunes"
/usr/bin/python3 "$ROOT/scripts/text_to_tokens.py" "$TOKENS"
"$DTC" zoo gpt --vocab 256 --ctx 64 --layers 2 --heads 4 --embd 128 --seed 0 -o "$OUT/gpt.dtm"
"$DTC" compile "$OUT/gpt.dtm" -o "$OUT/gpt.dtp" --batch 32 --optimizer adamw --lr 3e-3
"$DTRUN" "$OUT/gpt.dtp" --data "$TOKENS/train.bin" --steps 600 --seed 0 \
  --eval "$TOKENS/val.bin" --log "$OUT/gpt.jsonl" --save "$OUT/gpt" \
  --sample 200 --prompt "The meaning of life is "
