#!/usr/bin/env bash
# Builds the loaders' libFuzzer targets into build-fuzz/ (clang, ASan + UBSan, assertions on)
# and runs each for a number of executions, then prints one summary line per target. Exits
# non-zero when a target crashes, hangs, leaks or runs out of memory; the input that did it is
# left under build-fuzz/artifacts/<target>/ (docs/fuzzing.md: how to keep it as a regression).
#
#   scripts/fuzz.sh [--runs N] [--build-only] [plan|model|onnx|index|safetensors|hf]...
#   scripts/fuzz.sh --make-seeds      # rewrites fuzz/corpus/ with $DTC and $DTRUN (default build/)
#
# Targets: plan (Plan::fromBytes and what reads a loaded plan), model (ModelFile::fromBytes and
# the MLIR importer), onnx (the ONNX reader and translator, then the importer), index (a
# checkpoint's index.json), safetensors (a safetensors file's header), hf (a Hugging Face
# folder's model.safetensors.index.json and config.json). Default: all six, 10,000,000
# executions each. Each target's corpus grows in
# build-fuzz/corpus/<target>/ across runs; fuzz/corpus/<target>/ holds the checked-in seeds
# (valid files, which a format change makes stale: then --make-seeds) and fuzz/regressions/
# the inputs that once broke a loader.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-fuzz"
RUNS=10000000
BUILD_ONLY=0
MAKE_SEEDS=0
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --runs=*) RUNS="${1#--runs=}"; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --make-seeds) MAKE_SEEDS=1; shift ;;
    plan|model|onnx|index|safetensors|hf) TARGETS+=("$1"); shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(plan model onnx index safetensors hf)

# Small models of every zoo family and op type, and plans of every kind of partitioning; plan
# seeds are the FlatBuffer that Plan::fromBytes takes, without the file's checksum footer.
make_seeds() {
  local dtc=${DTC:-$ROOT/build/tools/dtc/dtc}
  if [ ! -x "$dtc" ]; then
    echo "fuzz.sh: --make-seeds needs a built dtc: $dtc is missing (make, or set DTC)" >&2
    exit 2
  fi
  local models="$ROOT/fuzz/corpus/model" plans="$ROOT/fuzz/corpus/plan"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$models" "$plans"
  rm -f "$models"/* "$plans"/*
  "$dtc" zoo mlp --input 4 --hidden 4 --classes 2 -o "$models/mlp.dtm"
  "$dtc" zoo mlp --input 6 --hidden 5,4 --classes 3 -o "$models/mlp-2-hidden.dtm"
  "$dtc" zoo gpt --vocab 64 --ctx 16 --layers 2 --heads 4 --embd 32 -o "$models/gpt.dtm"
  "$dtc" zoo gpt --vocab 8 --ctx 4 --layers 1 --heads 2 --embd 4 -o "$models/gpt-tiny.dtm"
  "$dtc" zoo convnet --classes 2 -o "$models/convnet.dtm"
  flatc -b -o "$tmp" "$ROOT/frontends/model/model.fbs" "$ROOT/fuzz/misc_ops.json" \
    "$ROOT/frontends/model/test/Inputs/tiny_mlp.json"
  cp "$tmp/misc_ops.dtm" "$models/misc-ops.dtm"
  cp "$tmp/tiny_mlp.dtm" "$models/tiny-mlp-json.dtm"
  plan() {
    local name=$1 model=$2
    shift 2
    "$dtc" compile "$models/$model" -o "$tmp/$name.dtp" "$@" > /dev/null
    if [ "$(tail -c 16 "$tmp/$name.dtp" | head -c 4)" = DTCS ]; then
      head -c -16 "$tmp/$name.dtp" > "$plans/$name.dtp"
    else
      cp "$tmp/$name.dtp" "$plans/$name.dtp"
    fi
  }
  plan mlp-sgd mlp.dtm --batch 8 --optimizer sgd --momentum 0.9
  plan mlp-adamw-cosine mlp.dtm --batch 8 --optimizer adamw --lr-schedule cosine \
    --warmup-steps 2 --decay-steps 10 --clip-grad-norm 1 --no-decay '*.bias'
  plan mlp-fp16-accum mlp.dtm --batch 8 --precision fp16 --accumulate 2 --lr-schedule linear \
    --warmup-steps 1 --decay-steps 5
  plan mlp-dp2-zero1 mlp.dtm --batch 8 --mesh dp=2 --zero 1 --optimizer adamw
  plan mlp-tp2 mlp.dtm --batch 8 --mesh tp=2 --shard 'fc0.weight=tp,-' --shard 'fc0.bias=tp' \
    --shard 'fc1.weight=-,tp'
  plan mlp-dp2-tp2-chunks mlp.dtm --batch 8 --mesh dp=2,tp=2 --shard 'fc0.weight=2xtp,-' \
    --shard 'fc0.bias=2xtp' --shard 'fc1.weight=-,2xtp'
  plan mlp-pp2 mlp-2-hidden.dtm --batch 8 --mesh pp=2 --microbatches 2 --optimizer adamw
  plan gpt-tiny-tp2 gpt-tiny.dtm --batch 2 --mesh tp=2 --optimizer adamw
  plan gpt-tiny-pp2 gpt-tiny.dtm --batch 2 --mesh pp=2 --microbatches 2
  plan misc-ops-mse misc-ops.dtm --batch 4
  # ONNX: small exports of the parity test's modules and hand-written graphs.
  local onnx="$ROOT/fuzz/corpus/onnx"
  mkdir -p "$onnx"
  rm -f "$onnx"/*
  /usr/bin/python3 "$ROOT/tests/lit/Inputs/make_onnx.py" linear "$onnx/linear.onnx"
  /usr/bin/python3 - "$onnx" "$ROOT/tests/e2e" <<'PY' 2> /dev/null
import sys, torch
sys.path.insert(0, sys.argv[2])
import test_onnx_parity as t
out = sys.argv[1]
torch.manual_seed(0)
t.export(t.SoftmaxMlp(), (torch.randn(2, 12),), f"{out}/mlp.onnx", ["x"], ["probs"], ["x"])
t.export(t.Gpt(vocab=8, t=4, c=8, heads=2, layers=1), (torch.randint(0, 8, (2, 4)), torch.randint(0, 8, (2, 4))),
         f"{out}/gpt.onnx", ["idx", "targets"], ["loss"], ["idx", "targets"])
t.export(t.ResNet(), (torch.randn(2, 1, 8, 8),), f"{out}/cnn.onnx", ["x"], ["logits"], ["x"])
PY
  # Checkpoint indexes and safetensors headers of checkpoints of several layouts, and a Hugging
  # Face folder's files.
  DTC="$dtc" DTRUN="${DTRUN:-$ROOT/build/tools/dtrun/dtrun}" \
    /usr/bin/python3 "$ROOT/fuzz/make_file_seeds.py" "$ROOT/fuzz/corpus" "$tmp"
  du -sh "$ROOT/fuzz/corpus"
}
if [ "$MAKE_SEEDS" = 1 ]; then
  make_seeds
  exit 0
fi

CC=${CC_FUZZ:-clang-14}
CXX=${CXX_FUZZ:-clang++-14}
if ! command -v "$CXX" > /dev/null || ! command -v "$CC" > /dev/null; then
  echo "fuzz.sh: $CXX not found; install Debian's clang-14 and libclang-rt-14-dev (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    "$CXX" -x c++ -fsanitize=fuzzer,address,undefined -o /dev/null - 2> /dev/null; then
  echo "fuzz.sh: $CXX cannot link libFuzzer with ASan/UBSan; install Debian's libclang-rt-14-dev (apt-get install libclang-rt-14-dev)" >&2
  exit 2
fi

# Assertions stay on (no NDEBUG): a failed assert is a finding like any crash.
nice -n 19 cmake -S "$ROOT" -B "$BUILD" -G Ninja \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" \
  -DDTC_BUILD_FUZZERS=ON -DDTC_BUILD_TESTS=OFF -DDTC_BUILD_CUDA=OFF > "$BUILD.configure.log" 2>&1 ||
  { cat "$BUILD.configure.log"; exit 1; }
mv "$BUILD.configure.log" "$BUILD/configure.log"
nice -n 19 cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]/%/_loader_fuzzer}"
[ "$BUILD_ONLY" = 1 ] && exit 0

# Sizes: above the largest seed, so mutations can grow inputs; the rss limit (and the malloc
# limit, the same by default) stops a loader that allocates in proportion to a size field.
declare -A MAX_LEN=([plan]=131072 [model]=32768 [onnx]=65536 [index]=65536 [safetensors]=16384
  [hf]=16384)
# allow_user_poisoning=0: see model_loader_fuzzer.cpp (libMLIR and LLVM's inlined allocator).
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allow_user_poisoning=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

status=0
summaries=()
for target in "${TARGETS[@]}"; do
  fuzzer="$BUILD/fuzz/${target}_loader_fuzzer"
  corpus="$BUILD/corpus/$target"
  artifacts="$BUILD/artifacts/$target"
  log="$BUILD/${target}_loader_fuzzer.log"
  mkdir -p "$corpus" "$artifacts" "$ROOT/fuzz/regressions/$target"
  before=$(find "$artifacts" -type f | wc -l)
  echo "fuzz.sh: ${target}_loader_fuzzer, $RUNS executions (log: $log)"
  start=$(date +%s.%N)
  rc=0
  nice -n 19 "$fuzzer" -runs="$RUNS" -max_len="${MAX_LEN[$target]}" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -dict="$ROOT/fuzz/$target.dict" \
    -artifact_prefix="$artifacts/" "$corpus" "$ROOT/fuzz/corpus/$target" \
    "$ROOT/fuzz/regressions/$target" > "$log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  found=$(( $(find "$artifacts" -type f | wc -l) - before ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
  cov=$(echo "$done_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$done_line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  corp=$(echo "$done_line" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  secs=$(echo "$start $end" | awk '{printf "%.0f", $2 - $1}')
  rate=$(echo "${execs:-0} $start $end" | awk '{d = $3 - $2; printf "%.0f", (d > 0 ? $1 / d : 0)}')
  line="${target}_loader_fuzzer: ${execs:-?} executions in ${secs} s (${rate} exec/s), coverage ${cov:-?} edges, ${ft:-?} features, corpus ${corp:-?} inputs, peak rss ${rss:-?} MB, crashes ${found}"
  if [ "$rc" -ne 0 ]; then
    line+=" (exit $rc; see $log)"
    status=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error:|artifact_prefix|Test unit written)' "$log" | head -8 >&2 || true
  fi
  summaries+=("$line")
  echo "$line"
done

echo "fuzz.sh: summary"
printf '  %s\n' "${summaries[@]}"
exit $status
