#!/usr/bin/env bash
# One call on a lent GPU machine: the GPU checks (tests/gpu/run.sh), then the GPT-2 and Llama
# benchmarks (bench/gpu_gpt2.sh: 124M bf16 against eager and torch.compile; bench/gpu_llama.sh:
# Llama 3.2 1B at context 4096 in bf16 and FP8; 3 interleaved rounds each, what fits one lease),
# each under its own time limit so that a hang in one still leaves the others' numbers, with
# every log copied under $OUT (the device tool brings that folder back). The full tables (every
# size, context and torch.compile mode) are the scripts' defaults, for a longer lease.
# Needs gpu-carry/ from tests/gpu/prepare.sh. Usage: tests/gpu/lease.sh [CHECKS_S] [BENCH_S] [LLAMA_S]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out/gpu}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
timeout -k 10 "${1:-240}" bash "$ROOT/tests/gpu/run.sh" > "$OUT/checks.log" 2>&1
checks=$?
timeout -k 10 "${2:-240}" bash "$ROOT/bench/gpu_gpt2.sh" --sizes 124M --precisions bf16 \
  --peers bf16,compile --rounds 3 > "$OUT/bench.log" 2>&1
bench=$?
timeout -k 10 "${3:-240}" bash "$ROOT/bench/gpu_llama.sh" --models 1B --contexts 4096 \
  --precision bf16,fp8,fp8-delayed --peers eager,compile --rounds 3 > "$OUT/bench-llama.log" 2>&1
llama=$?
# The per-plan outputs of the checks, for the failures' details.
(cd "$ROOT/build-gpu" && tar -czf "$OUT/checks-logs.tgz" ./*.out ./*.jsonl 2>/dev/null)
grep -E '^(====|FAILED|GPU checks|[a-z0-9-]+: (losses|CUDA|checkpoint))|on cuda,|failed|error' "$OUT/checks.log" | tail -80
echo "---- bench (exit $bench)"
tail -30 "$OUT/bench.log"
echo "---- llama bench (exit $llama)"
tail -30 "$OUT/bench-llama.log"
echo "checks exit $checks, bench exit $bench, llama bench exit $llama"
