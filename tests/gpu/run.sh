#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU and the CUDA toolkit (no LLVM/MLIR needed):
# takes the runtime from gpu-carry/bundle.tar.xz (tests/gpu/bundle.sh: built where the compiler
# builds, with the libraries and the MPI launcher the lent machine's image lacks) or, without a
# bundle (or with DTC_GPU_BUILD=1), builds the runtime alone with the CUDA backend plugin; runs
# the kernel parity test (one process, then two MPI processes for the collectives), then the
# end-to-end training checks.
# Exits non-zero on any failure, and when no GPU is usable (a skip is a failure here).
#
#   tests/gpu/run.sh [BUILD_DIR]      (default: build-gpu in the repository root)
#
# DTC_GPU_REHEARSAL=1 rehearses the script where there is no GPU (so a lent GPU's time is not
# spent on the script's own mistakes): the same build, the kernel tests' skip accepted, the NCCL
# section left out, and every carried plan trained on `cpu-staged` (the device path of the
# executor on CPU kernels) where it would use `cuda`.
set -euo pipefail
REHEARSAL="${DTC_GPU_REHEARSAL:-0}"
GPU_DEVICE=cuda
[ "$REHEARSAL" = 1 ] && GPU_DEVICE=cpu-staged

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build-gpu}"
JOBS="${JOBS:-$(nproc)}"
failures=0

section() { printf '\n==== %s ====\n' "$*"; }
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

section "machine"
[ "$REHEARSAL" = 1 ] && echo "REHEARSAL: no GPU expected; 'cuda' runs are cpu-staged runs"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "(nvidia-smi not found)"
NVCC="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
BUNDLE_TAR="$ROOT/gpu-carry/bundle.tar.xz"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np)
if [ -f "$BUNDLE_TAR" ] && [ "${DTC_GPU_BUILD:-0}" != 1 ]; then
  section "runtime: the carried bundle (tests/gpu/bundle.sh) unpacked into $BUILD"
  rm -rf "$BUILD" && mkdir -p "$BUILD"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE_TAR" "$BUILD"
  # shellcheck disable=SC1091
  source "$BUILD/env.sh"  # library path, DTC_NCCL_LIBRARY, MPICH's mpiexec as MPIRUN
  echo "MPI launcher: $(command -v mpiexec); NCCL: ${DTC_NCCL_LIBRARY:-(libnccl.so.2 from the library path)}"
else
  "$NVCC" --version | tail -1 || { echo "no nvcc at $NVCC (set CUDACXX)"; exit 1; }
  missing=()
  for tool in cmake ninja flatc mpirun; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  if ((${#missing[@]})); then echo "missing tools: ${missing[*]} (carry gpu-carry/bundle.tar.xz instead)"; exit 1; fi

  section "configure and build (runtime only, CUDA on)"
  mkdir -p "$BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DDTC_BUILD_COMPILER=OFF -DDTC_BUILD_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" >"$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log"; exit 1; }
  cmake --build "$BUILD" -j "$JOBS" --target dtrun dtc_cuda kernels_test
fi

section "kernel parity: one process"
set +e
"$BUILD/tests/gpu/kernels_test"
rc=$?
set -e
if [ "$rc" -eq 77 ] && [ "$REHEARSAL" = 1 ]; then
  echo "(skipped: rehearsal without a GPU)"
elif [ "$rc" -eq 77 ]; then
  fail "kernels_test found no usable GPU (see its message: a driver older than the CUDA runtime reads the same)"
elif [ "$rc" -ne 0 ]; then
  fail "kernels_test (exit $rc)"
fi

section "kernel parity: collectives over two MPI processes (sharing the GPU if only one)"
set +e
"${MPIRUN[@]}" 2 "$BUILD/tests/gpu/kernels_test" --quiet
rc=$?
set -e
[ "$rc" -eq 0 ] || { [ "$rc" -eq 77 ] && [ "$REHEARSAL" = 1 ]; } || fail "kernels_test on 2 processes (exit $rc)"

section "collectives on NCCL"
# DTC_COLLECTIVES=nccl: one process (a one-rank communicator: NCCL's calls, the packing of
# strided blocks, 16-bit widening), then two processes with a GPU each, where there are two
# GPUs (NCCL refuses ranks that share one: kernels_test reports itself skipped). A fallback to
# the host-staged path (NCCL not found) is a failure.
nccl_check() {
  local log="$BUILD/nccl-$1.out" rc
  shift
  set +e
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  if grep -q "collectives stay host-staged" "$log"; then fail "NCCL did not load (see above)"; fi
  if [ "$rc" -eq 77 ]; then echo "(skipped)"; elif [ "$rc" -ne 0 ]; then fail "kernels_test --nccl (exit $rc)"; fi
}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$REHEARSAL" = 1 ]; then
  echo "(left out: rehearsal without a GPU)"
else
  nccl_check 1 "$BUILD/tests/gpu/kernels_test" --quiet --nccl
  if [ "${gpus:-0}" -ge 2 ]; then
    nccl_check 2 "${MPIRUN[@]}" 2 "$BUILD/tests/gpu/kernels_test" --quiet --nccl
  else
    echo "collectives on NCCL over two GPUs: skipped (${gpus:-0} GPU here)"
  fi
fi

section "end-to-end training checks"
# Plans compiled where the compiler builds (tests/gpu/prepare.sh writes gpu-carry/): each trains
# 20 steps on the CPU backend and on the GPU, and the loss curves must agree (fp32: 1e-4
# relative, sums run in other orders; bf16/fp16: 1e-2, as plans.txt says). Meshes run as MPI
# processes sharing the GPU (so their collectives are host-staged).
# These checks compare bits (graphs against eager, resumed runs against whole ones): cuDNN's
# attention runs its deterministic backward here.
export DTC_CUDNN_DETERMINISTIC=1
CARRY="$ROOT/gpu-carry"
if [ ! -f "$CARRY/plans.txt" ]; then
  fail "no $CARRY/plans.txt: run tests/gpu/prepare.sh where dtc builds and carry gpu-carry/"
else
  DTRUN="$BUILD/tools/dtrun/dtrun"
  eager_checks=0
  # The list on descriptor 3: mpirun reads standard input.
  while IFS='|' read -r -u 3 name model data procs flags tolerance; do
    for device in cpu cuda; do
      run_on=$device
      [ "$device" = cuda ] && run_on=$GPU_DEVICE
      cmd=("$DTRUN" "$CARRY/$name.dtp" --data "$CARRY/$data" --steps 20 --seed 1 --threads 4
           --device "$run_on" --log "$BUILD/e2e-$name-$device.jsonl")
      if [ "$procs" -gt 1 ]; then cmd=("${MPIRUN[@]}" "$procs" "${cmd[@]}"); fi
      if ! "${cmd[@]}" > "$BUILD/e2e-$name-$device.out" 2>&1; then
        tail -3 "$BUILD/e2e-$name-$device.out"; fail "$name on $device"; continue 2
      fi
    done
    python3 - "$BUILD/e2e-$name-cpu.jsonl" "$BUILD/e2e-$name-cuda.jsonl" "$name" "${tolerance:-1e-4}" <<'PY' || fail "$name: GPU and CPU losses differ"
import json, sys
cpu_log, gpu_log = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
cpu, gpu = ([e["loss"] for e in log] for log in (cpu_log, gpu_log))
err = max(abs(a - b) / abs(b) for a, b in zip(gpu, cpu))
bound = float(sys.argv[4])
# Plans that clip or report it: the global gradient norm, reduced on the device, within the same bound.
norm_err = max((abs(a["grad_norm"] - b["grad_norm"]) / abs(b["grad_norm"]) for a, b in zip(gpu_log, cpu_log)
                if "grad_norm" in b), default=0.0)
norms = f"; grad norm max rel err {norm_err:.2e}" if "grad_norm" in cpu_log[0] else ""
print(f"{sys.argv[3]}: losses {cpu[0]:.5f} -> {cpu[-1]:.5f} (cpu), {gpu[0]:.5f} -> {gpu[-1]:.5f} (cuda); max rel err {err:.2e} (bound {bound:.0e}){norms}")
same_lr = [e.get("lr") for e in cpu_log] == [e.get("lr") for e in gpu_log]
sys.exit(0 if len(cpu) == len(gpu) == 20 and err <= bound and norm_err <= bound and same_lr else 1)
PY
    # What the device allocated for the plan, and what its steps took beyond it. A plan compiled
    # for CUDA plans every byte its steps use there (scratch, the GEMM workspace): nothing may be
    # beyond it. (Plans compiled for the CPU leave the CUDA kernels' scratch to the backend, and
    # the rehearsal's cpu-staged runs widen 16-bit operands the CUDA plan does not.)
    memory_line=$(grep -h -m1 -o "memory: .*)" "$BUILD/e2e-$name-cuda.out" || true)
    echo "$name on $GPU_DEVICE, $memory_line"
    if [ "$REHEARSAL" != 1 ] && [[ " $flags " == *" --device cuda "* ]] && [[ "$memory_line" == *"beyond the plan"* ]]; then
      fail "$name: the CUDA steps allocated memory the plan did not hold ($memory_line)"
    fi
    # CUDA graphs (on by default): a single-process plan's train_step must capture (a fallback
    # says so on stderr), and the first two such plans also run with DTC_CUDA_GRAPHS=0, whose
    # loss curve must be bit-identical: the same kernels in the same order, launched one by one.
    # (Meshes here share the GPU, so their collectives are host-staged and they run eagerly.)
    if [ "$procs" -le 1 ]; then
      if grep -q "runs without a CUDA graph" "$BUILD/e2e-$name-cuda.out"; then
        grep "runs without a CUDA graph" "$BUILD/e2e-$name-cuda.out"; fail "$name: CUDA graph capture fell back"
      fi
      eager_checks=$((eager_checks + 1))
      if [ "$eager_checks" -le 2 ]; then
        if ! DTC_CUDA_GRAPHS=0 "$DTRUN" "$CARRY/$name.dtp" --data "$CARRY/$data" --steps 20 --seed 1 --threads 4 \
             --device "$GPU_DEVICE" --log "$BUILD/e2e-$name-cuda-eager.jsonl" > "$BUILD/e2e-$name-cuda-eager.out" 2>&1; then
          tail -3 "$BUILD/e2e-$name-cuda-eager.out"; fail "$name on cuda with DTC_CUDA_GRAPHS=0"
        else
          python3 - "$BUILD/e2e-$name-cuda.jsonl" "$BUILD/e2e-$name-cuda-eager.jsonl" "$name" <<'PY' || fail "$name: losses with and without CUDA graphs differ"
import json, sys
graph, eager = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
same = len(graph) == len(eager) == 20 and all(a == b for a, b in zip(graph, eager))
print(f"{sys.argv[3]}: CUDA graphs vs DTC_CUDA_GRAPHS=0: {'bit-identical' if same else 'DIFFERENT'} over {len(graph)} steps")
if not same:
    for k, (a, b) in enumerate(zip(graph, eager)):
        if a != b: print(f"  step {k}: {a!r} (graph) vs {b!r} (eager)")
sys.exit(0 if same else 1)
PY
        fi
      fi
    fi
  done 3< "$CARRY/plans.txt"

  section "checkpoints on the device"
  # A run checkpointed at step 10 on the device and resumed there must continue bit-identically
  # (the state goes to the host and back, every byte); so must one checkpointed in the
  # background at step 5 (the snapshot read from device memory into page-locked memory); a
  # checkpoint the CPU wrote resumes on the device within the plan's CPU-vs-GPU tolerance.
  # Against the 20-step runs above. Transformers' layout on tp=2 reads its q/k/v column blocks
  # from device memory in strided copies.
  while IFS='|' read -r -u 3 name model data procs flags tolerance; do
    case "$name" in gpt-cuda|gpt-cuda-bf16-tp2|gpt-hf-cuda-tp2|mlp-fp16|gpt-pp2) ;; *) continue ;; esac
    for from in cuda cuda-async cpu; do
      writer=$from
      [ "$from" != cpu ] && writer=$GPU_DEVICE
      ck="$BUILD/ckpt-$name-$from"
      rm -rf "$ck"
      first=("$DTRUN" "$CARRY/$name.dtp" --data "$CARRY/$data" --steps 10 --seed 1 --threads 4 --device "$writer"
             --checkpoint "$ck")
      resume="$ck"
      if [ "$from" = cuda-async ]; then
        first+=(--checkpoint-every 5 --checkpoint-async)
        resume="$ck/step-5"
      fi
      rest=("$DTRUN" "$CARRY/$name.dtp" --data "$CARRY/$data" --steps 20 --threads 4 --device "$GPU_DEVICE"
            --resume "$resume" --log "$BUILD/ckpt-$name-$from.jsonl")
      if [ "$procs" -gt 1 ]; then first=("${MPIRUN[@]}" "$procs" "${first[@]}"); rest=("${MPIRUN[@]}" "$procs" "${rest[@]}"); fi
      if ! "${first[@]}" > "$BUILD/ckpt-$name-$from.out" 2>&1 || ! "${rest[@]}" >> "$BUILD/ckpt-$name-$from.out" 2>&1; then
        tail -3 "$BUILD/ckpt-$name-$from.out"; fail "$name: checkpoint from $from, resumed on the device"; continue
      fi
      bound=0
      [ "$from" = cpu ] && bound="${tolerance:-1e-4}"
      python3 - "$BUILD/e2e-$name-cuda.jsonl" "$BUILD/ckpt-$name-$from.jsonl" "$name" "$from" "$bound" <<'PY' || fail "$name: resumed run differs"
import json, sys
whole, resumed = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
at = 5 if sys.argv[4] == "cuda-async" else 10
tail = {e["step"]: e["loss"] for e in whole if e["step"] > at}
ours = {e["step"]: e["loss"] for e in resumed}
bound = float(sys.argv[5])
err = max(abs(ours[s] - tail[s]) / abs(tail[s]) for s in tail) if sorted(ours) == sorted(tail) else float("inf")
what = "bit-identical" if bound == 0 and err == 0 else f"max rel err {err:.2e} (bound {bound:.0e})"
print(f"{sys.argv[3]}: checkpoint at step {at} on {sys.argv[4]}, steps {at + 1}-20 on the device: {what}")
sys.exit(0 if err <= bound else 1)
PY
    done
  done 3< "$CARRY/plans.txt"
fi

section "summary"
if [ "$failures" -ne 0 ]; then
  echo "GPU checks: $failures failure(s)"
  exit 1
fi
if [ "$REHEARSAL" = 1 ]; then echo "GPU checks rehearsed: all passed (no GPU ran)"; else echo "GPU checks: all passed"; fi
