#!/usr/bin/env bash
# One call on a lent GPU machine: the GPU checks (tests/gpu/run.sh) then the GPT-2 benchmark
# (bench/gpu_gpt2.sh), each under its own time limit so that a hang in one still leaves the
# other's numbers, with every log copied under $OUT (the device tool brings that folder back).
# Needs gpu-carry/ from tests/gpu/prepare.sh. Usage: tests/gpu/lease.sh [CHECKS_S] [BENCH_S]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out/gpu}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
timeout -k 10 "${1:-240}" bash "$ROOT/tests/gpu/run.sh" > "$OUT/checks.log" 2>&1
checks=$?
timeout -k 10 "${2:-270}" bash "$ROOT/bench/gpu_gpt2.sh" > "$OUT/bench.log" 2>&1
bench=$?
# The per-plan outputs of the checks, for the failures' details.
(cd "$ROOT/build-gpu" && tar -czf "$OUT/checks-logs.tgz" ./*.out ./*.jsonl 2>/dev/null)
grep -E '^(====|FAILED|GPU checks|[a-z0-9-]+: (losses|CUDA|checkpoint))|on cuda,|failed|error' "$OUT/checks.log" | tail -80
echo "---- bench (exit $bench)"
tail -30 "$OUT/bench.log"
echo "checks exit $checks, bench exit $bench"
