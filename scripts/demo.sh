#!/usr/bin/env bash
# The main job (`make demo`): the zoo MLP (on one process, then data-parallel on two) and
# ConvNet trained on Fashion-MNIST (test accuracy printed), then a small GPT on a byte-level text
# corpus with nanoGPT's recipe (validation loss every 200 steps and a sampled continuation), and that GPT again on a 2-stage pipeline,
# stopped, resumed from its checkpoint, and evaluated on one process from the same checkpoint.
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

# The same training, data-parallel over 2 MPI processes: the compiler splits the batch, inserts
# the gradient all-reduce (one 25 MB bucket) and every rank reads its half of each batch. The
# losses equal the single-process run's to fp32 rounding (sums run in another order) for
# hundreds of steps; over 1200 AdamW steps such differences compound, and the test accuracy
# lands within a few tenths of a percent.
"$DTC" compile "$OUT/mlp.dtm" -o "$OUT/mlp-dp2.dtp" --batch 100 --optimizer adamw --lr 1e-3 \
  --mesh dp=2
"$DTC" inspect "$OUT/mlp-dp2.dtp" | grep -A3 "function train_step"
mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRUN" "$OUT/mlp-dp2.dtp" \
  --data "$DATA/train" --steps 1200 --seed 0 --threads 1 --eval "$DATA/test" \
  --log "$OUT/train-dp2.jsonl" | tail -2

# The classic ConvNet (Conv-BatchNorm-ReLU-MaxPool x2, Linear) on the same data: one epoch.
"$DTC" zoo convnet --seed 0 -o "$OUT/convnet.dtm"
"$DTC" compile "$OUT/convnet.dtm" -o "$OUT/convnet.dtp" --batch 100 --optimizer adamw --lr 2e-3
"$DTRUN" "$OUT/convnet.dtp" --data "$DATA/train" --steps 600 --seed 0 \
  --eval "$DATA/test" --log "$OUT/convnet.jsonl" --save "$OUT/convnet"

# A small GPT (nanoGPT's architecture) on a byte-level corpus of Debian's fortunes, with
# nanoGPT's recipe: linear warmup then cosine decay, gradients clipped to a global norm of 1,
# weight decay on matrices and embeddings only, validation loss every 200 steps (on 20 batches,
# nanoGPT's eval_iters), and a continuation sampled as its sample.py does.
TOKENS="$ROOT/data/fortunes"
/usr/bin/python3 "$ROOT/scripts/text_to_tokens.py" "$TOKENS"
"$DTC" zoo gpt --vocab 256 --ctx 64 --layers 2 --heads 4 --embd 128 --seed 0 -o "$OUT/gpt.dtm"
RECIPE=(--optimizer adamw --lr 3e-3 --weight-decay 0.1 --no-decay '*.bias' --no-decay '*ln_*'
        --lr-schedule cosine --warmup-steps 60 --decay-steps 600 --min-lr 3e-4 --clip-grad-norm 1.0)
"$DTC" compile "$OUT/gpt.dtm" -o "$OUT/gpt.dtp" --batch 32 "${RECIPE[@]}"
"$DTRUN" "$OUT/gpt.dtp" --data "$TOKENS/train.bin" --steps 600 --seed 0 \
  --eval "$TOKENS/val.bin" --eval-every 200 --eval-batches 20 --log "$OUT/gpt.jsonl" --save "$OUT/gpt" \
  --sample 200 --prompt "The meaning of life is "

# The same GPT on a 2-stage pipeline (2 MPI processes): the compiler cuts it between layers,
# runs 4 micro-batches per step in 1F1B order, sends activations and gradients between the
# stages (the tied embedding from stage 0 to the LM head on stage 1 and its gradient back), and
# predicts the bubble; the planned timeline is a Chrome trace (chrome://tracing, Perfetto).
"$DTC" compile "$OUT/gpt.dtm" -o "$OUT/gpt-pp2.dtp" --batch 32 "${RECIPE[@]}" \
  --mesh pp=2 --microbatches 4 --schedule 1f1b --schedule-trace "$OUT/gpt-pp2-schedule.json"
"$DTC" inspect "$OUT/gpt-pp2.dtp" | grep "^stage ., predicted"
# It checkpoints every 100 steps and after its last: the first run ends at step 150 (its
# checkpoint: step-150), and the same command with --steps 300 and --resume continues from there
# exactly as one uninterrupted run would. The last checkpoint then loads into the single-process
# plan (another layout: each rank's pieces are reassembled), which evaluates the model and
# writes it as one PyTorch file.
rm -rf "$OUT/gpt-pp2-ckpt"
PP2=(mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRUN" "$OUT/gpt-pp2.dtp" --data "$TOKENS/train.bin"
     --seed 0 --threads 1 --log "$OUT/gpt-pp2.jsonl" --checkpoint "$OUT/gpt-pp2-ckpt" --checkpoint-every 100)
"${PP2[@]}" --steps 150 | grep checkpoint
"${PP2[@]}" --steps 300 --resume "$OUT/gpt-pp2-ckpt" | grep -E "resumed|checkpoint|step   300"
"$DTRUN" "$OUT/gpt.dtp" --resume "$OUT/gpt-pp2-ckpt" --eval "$TOKENS/val.bin" --save "$OUT/gpt-pp2-model" | grep -E "resumed|eval"
echo "checkpoints: $OUT/gpt-pp2-ckpt (latest: $(readlink "$OUT/gpt-pp2-ckpt/latest")); as one PyTorch file: $OUT/gpt-pp2-model/model.safetensors"
mpirun --allow-run-as-root --oversubscribe -np 2 "$DTRUN" "$OUT/gpt-pp2.dtp" \
  --data "$TOKENS/train.bin" --steps 3 --threads 1 --trace "$OUT/gpt-pp2-measured.json" > /dev/null
echo "pipeline timelines: $OUT/gpt-pp2-schedule.json (planned), $OUT/gpt-pp2-measured.json (measured)"
