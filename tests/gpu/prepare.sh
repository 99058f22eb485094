#!/usr/bin/env bash
# Run HERE (where the compiler builds): compiles the plans and writes the data the GPU machine's
# end-to-end checks use (tests/gpu/run.sh), into gpu-carry/ (ignored by git; carry it to the GPU
# machine). Usage: tests/gpu/prepare.sh [BUILD_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
DTC="$BUILD/tools/dtc/dtc"
OUT="$ROOT/gpu-carry"
rm -rf "$OUT" && mkdir -p "$OUT/mlp-data" "$OUT/conv-data"
/usr/bin/python3 - "$OUT" <<'PY'
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(0)
np.save(f"{out}/mlp-data/input.npy", rng.standard_normal((512, 784)).astype(np.float32))
np.save(f"{out}/mlp-data/target.npy", rng.integers(0, 10, 512).astype(np.int64))
np.save(f"{out}/conv-data/input.npy", rng.random((256, 784), dtype=np.float32))
np.save(f"{out}/conv-data/target.npy", rng.integers(0, 10, 256).astype(np.int64))
# GPT-2's data for bench/gpu_profile.sh and tests/gpu/calibrate.sh: 200,000 random tokens.
gpt2 = np.zeros(256, dtype=np.int32)
gpt2[:3] = [20240520, 1, 200000]
with open(f"{out}/gpt2-tokens.bin", "wb") as f:
    f.write(gpt2.tobytes())
    f.write(np.random.default_rng(0).integers(0, 50257, 200000).astype(np.uint16).tobytes())
tokens = ((np.arange(20000) * 7 + rng.integers(0, 3, 20000)) % 64).astype(np.int64)
header = np.zeros(256, dtype=np.int32)
header[0], header[1], header[2] = 20240520, 1, len(tokens)  # llm.c token file, version 1 (uint16)
with open(f"{out}/tokens.bin", "wb") as f:
    f.write(header.tobytes())
    f.write(tokens.astype(np.uint16).tobytes())
PY
"$DTC" zoo mlp --seed 5 -o "$OUT/mlp.dtm"
"$DTC" zoo gpt --vocab 64 --ctx 16 --layers 2 --heads 4 --embd 32 --seed 11 -o "$OUT/gpt.dtm"
# The same GPT in transformers' layout (a fused q/k/v weight, split by heads along its columns).
"$DTC" zoo gpt --vocab 64 --ctx 16 --layers 2 --heads 4 --embd 32 --seed 11 --layout hf -o "$OUT/gpt-hf.dtm"
"$DTC" zoo convnet --seed 2 -o "$OUT/convnet.dtm"
"$DTC" zoo llama --vocab 64 --ctx 16 --layers 2 --heads 4 --kv-heads 2 --embd 32 --ffn 64 --seed 7 -o "$OUT/llama.dtm"
# A GPT whose MLPs are mixtures of 4 experts (top-2, capacity factor 1: tokens are dropped).
"$DTC" zoo gpt --vocab 64 --ctx 16 --layers 2 --heads 4 --embd 32 --experts 4 --top-k 2 \
  --capacity-factor 1.0 --seed 13 -o "$OUT/moe.dtm"
# name | model | data | processes | compile flags | loss tolerance (max relative difference of
# the GPU's losses from the CPU's; 16-bit products may round the other way, 1 ulp of bf16 is 4e-3)
cat > "$OUT/plans.txt" <<'LIST'
mlp|mlp.dtm|mlp-data|1|--batch 64 --optimizer adamw --lr 1e-3|1e-4
gpt|gpt.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3|1e-4
convnet|convnet.dtm|conv-data|1|--batch 32 --optimizer sgd --lr 0.02 --momentum 0.9|1e-4
mlp-dp2|mlp.dtm|mlp-data|2|--batch 64 --optimizer adamw --lr 1e-3 --mesh dp=2|1e-4
gpt-tp2|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --mesh tp=2|1e-4
gpt-pp2|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --mesh pp=2 --microbatches 4|1e-4
gpt-bf16|gpt.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --precision bf16|1e-2
mlp-fp16|mlp.dtm|mlp-data|1|--batch 64 --optimizer adamw --lr 1e-3 --precision fp16|1e-2
gpt-fp16|gpt.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --precision fp16|1e-2
gpt-bf16-tp2|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --precision bf16 --mesh tp=2|1e-2
gpt-fp16-pp2|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --precision fp16 --mesh pp=2 --microbatches 4|1e-2
gpt-fused|gpt.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --fused-attention|1e-4
gpt-cuda|gpt.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --device cuda|1e-4
gpt-cuda-bf16|gpt.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --precision bf16|1e-2
gpt-cuda-bf16-tp2|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --precision bf16 --mesh tp=2|1e-2
gpt-hf-cuda-tp2|gpt-hf.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --mesh tp=2|1e-4
gpt-cuda-dp2-zero3|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --mesh dp=2 --zero 3 --recompute full|1e-4
gpt-cuda-dp2-zero2-acc2|gpt.dtm|tokens.bin|2|--batch 4 --accumulate 2 --optimizer adamw --lr 1e-3 --device cuda --precision bf16 --mesh dp=2 --zero 2|1e-2
gpt-recipe|gpt.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 3e-3 --no-decay *.bias --no-decay *ln_* --lr-schedule cosine --warmup-steps 4 --decay-steps 16 --min-lr 3e-4 --clip-grad-norm 0.3|1e-4
gpt-recipe-tp2-pp2|gpt.dtm|tokens.bin|4|--batch 8 --optimizer adamw --lr 3e-3 --no-decay *.bias --lr-schedule cosine --warmup-steps 4 --decay-steps 16 --clip-grad-norm 0.3 --mesh tp=2,pp=2 --microbatches 2 --sequence-parallel|1e-4
llama|llama.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3|1e-4
llama-cuda-bf16|llama.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --precision bf16|1e-2
llama-cuda-fp8|llama.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --precision fp8|2e-2
llama-cuda-fp8-delayed|llama.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --precision fp8 --fp8-scaling delayed|2e-2
llama-cuda-tp2|llama.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --mesh tp=2|1e-4
llama-cuda-bf16-tp2-pp2|llama.dtm|tokens.bin|4|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --precision bf16 --mesh tp=2,pp=2 --microbatches 2|1e-2
gpt-cuda-cp2-ring|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --fused-attention --mesh cp=2 --cp-attention ring|1e-4
gpt-cuda-cp2-ulysses|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --fused-attention --mesh cp=2 --cp-attention ulysses|1e-4
gpt-cuda-bf16-cp2|gpt.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --fused-attention --precision bf16 --mesh cp=2|1e-2
llama-cuda-dp2-cp2-ring|llama.dtm|tokens.bin|4|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --fused-attention --mesh dp=2,cp=2 --cp-attention ring|1e-4
moe|moe.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3|1e-4
moe-cuda|moe.dtm|tokens.bin|1|--batch 8 --optimizer adamw --lr 1e-3 --device cuda|1e-4
moe-cuda-bf16-ep2|moe.dtm|tokens.bin|2|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --precision bf16 --mesh ep=2|1e-2
moe-cuda-dp2-ep2-zero3|moe.dtm|tokens.bin|4|--batch 8 --optimizer adamw --lr 1e-3 --device cuda --mesh dp=2,ep=2 --zero 3|1e-4
mlp-recipe-linear|mlp.dtm|mlp-data|1|--batch 64 --optimizer sgd --lr 0.05 --momentum 0.9 --lr-schedule linear --warmup-steps 5 --decay-steps 25 --log-grad-norm|1e-4
LIST
set -f  # the flags' globs (--no-decay *.bias) are dtc's, not the shell's
while IFS='|' read -r name model data procs flags tolerance; do
  # shellcheck disable=SC2086
  "$DTC" compile "$OUT/$model" -o "$OUT/$name.dtp" $flags > /dev/null
done < "$OUT/plans.txt"
set +f
echo "wrote $OUT: $(wc -l < "$OUT/plans.txt") plans; carry it (device tool: carry [\"gpu-carry\"])"

# GPT-2 124M for bench/gpu_gpt2.sh (nanoGPT's shapes, vocabulary padded to 50304, context 1024),
# with the CUDA defaults (attention on the fused projection, GEMM epilogues, multi-tensor
# AdamW): bf16 mixed precision, fp32 and FP8; and GPT-2 350M (24 layers of 1024, 16 heads) in
# bf16 and FP8 at batch 4.
"$DTC" zoo gpt --vocab 50304 --ctx 1024 --layers 12 --heads 12 --embd 768 --seed 0 -o "$OUT/gpt2.dtm"
for precision in bf16 fp32 fp8; do
  "$DTC" compile "$OUT/gpt2.dtm" -o "$OUT/gpt2-$precision.dtp" --batch 8 --optimizer adamw --lr 6e-4 \
    --device cuda --precision "$precision" > /dev/null
done
"$DTC" zoo gpt --vocab 50304 --ctx 1024 --layers 24 --heads 16 --embd 1024 --seed 0 -o "$OUT/gpt2-350m.dtm"
for precision in bf16 fp8; do
  "$DTC" compile "$OUT/gpt2-350m.dtm" -o "$OUT/gpt2-350m-$precision.dtp" --batch 4 --optimizer adamw \
    --lr 3e-4 --device cuda --precision "$precision" > /dev/null
done
# The same bf16 step with attention unfused (batched GEMMs and a causal softmax, the [T, T]
# probabilities kept for backward), to measure what fused attention buys on this GPU.
"$DTC" compile "$OUT/gpt2.dtm" -o "$OUT/gpt2-bf16-unfused-attention.dtp" --batch 8 --optimizer adamw --lr 6e-4 \
  --device cuda --precision bf16 --no-fused-attention > /dev/null
echo "wrote $OUT/gpt2-{bf16,fp32,fp8,bf16-unfused-attention}.dtp (GPT-2 124M, batch 8 x 1024 tokens) and gpt2-350m-{bf16,fp8}.dtp (batch 4 x 1024) for bench/gpu_gpt2.sh"

# Llama 3.2 1B (16 x 2048, 32 query / 8 key-value heads, FFN 8192) and 3B (28 x 3072, 24 / 8) for
# bench/gpu_llama.sh: the vocabulary of 128,256, the head tied, rotary theta 500,000, bf16 with
# the CUDA defaults, AdamW, each also in FP8 (…-fp8.dtp, --precision fp8, and …-fp8-delayed.dtp
# with --fp8-scaling delayed); 16,384 tokens a step
# for 1B and 8,192 for 3B (bench/gpu_llama.py's BATCH), and Llama 3's token file (llm.c's uint32
# format). The plans lease.sh runs (1B and 3B at 4096);
# DTC_BENCH_LLAMA=all for every size and context (2048, 4096, 8192: their rotary tables take
# about 26 MB of the carry).
/usr/bin/python3 - "$OUT" <<'PY'
import sys, numpy as np
header = np.zeros(256, dtype=np.int32)
header[:3] = [20240801, 7, 400000]
with open(f"{sys.argv[1]}/llama3-tokens.bin", "wb") as f:
    f.write(header.tobytes())
    f.write(np.random.default_rng(0).integers(0, 128256, 400000).astype(np.uint32).tobytes())
PY
if [ "${DTC_BENCH_LLAMA:-}" = all ]; then
  llama_plans="1b:2048:8 1b:4096:4 1b:8192:2 3b:2048:4 3b:4096:2 3b:8192:1"
else
  llama_plans="1b:4096:4 3b:4096:2"
fi
for spec in $llama_plans; do
  IFS=: read -r size context batch <<< "$spec"
  if [ "$size" = 1b ]; then shape="--layers 16 --embd 2048 --heads 32"; else shape="--layers 28 --embd 3072 --heads 24"; fi
  # shellcheck disable=SC2086
  "$DTC" zoo llama --vocab 128256 --ctx "$context" $shape --kv-heads 8 --ffn 8192 --rope-theta 500000 \
    --rms-eps 1e-5 --tie-embeddings --seed 0 -o "$OUT/llama-bench.dtm"
  for variant in bf16 fp8 fp8-delayed; do
    suffix=$([ "$variant" = bf16 ] || echo "-$variant")
    flags="--precision ${variant%%-*}"
    [ "$variant" = fp8-delayed ] && flags="$flags --fp8-scaling delayed"
    # shellcheck disable=SC2086
    "$DTC" compile "$OUT/llama-bench.dtm" -o "$OUT/llama-$size-$context$suffix.dtp" --batch "$batch" \
      --optimizer adamw --lr 3e-4 --device cuda $flags > /dev/null
  done
done
rm -f "$OUT/llama-bench.dtm"
echo "wrote $OUT/llama-*.dtp ($llama_plans) and llama3-tokens.bin for bench/gpu_llama.sh"

# The runtime for the GPU machine, whose image cannot build it (tests/gpu/bundle.sh).
"$ROOT/tests/gpu/bundle.sh"
