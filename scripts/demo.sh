#!/usr/bin/env bash
# The main job (`make demo`): Fashion-MNIST -> .npy, the zoo MLP compiled to a training plan,
# trained with dtrun, evaluated on the test set.
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
