#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer and UndefinedBehaviorSanitizer (gcc) into
# build-asan/, assertions on, and runs them with ctest; any report fails the test it came from.
#
#   scripts/sanitize.sh [--runtime-only] [-R REGEX]
#
# --runtime-only configures without the compiler (no LLVM; quicker), which leaves out the unit
# tests that compile models (gradcheck, plan_fuzz, reshard_planner, the model loader's corpus).
# -R picks tests by name among the unit tests (default: every test named unit.*).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-asan"
COMPILER=ON
REGEX='^unit\.'
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime-only) COMPILER=OFF; shift ;;
    -R) REGEX="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "sanitize.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Undefined behaviour stops the process (and fails the test) instead of printing and going on.
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
nice -n 19 cmake -S "$ROOT" -B "$BUILD" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DDTC_BUILD_COMPILER=$COMPILER -DDTC_BUILD_TESTS=ON -DDTC_BUILD_CUDA=OFF \
  > "$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; exit 1; }
mv "$BUILD.configure.log" "$BUILD/configure.log"
nice -n 19 cmake --build "$BUILD" -j "$(nproc)"

# allow_user_poisoning=0: LLVM's allocator headers poison bump-allocator slabs when inlined into
# instrumented code, and libMLIR (not instrumented) allocates from them without unpoisoning.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allow_user_poisoning=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
cd "$BUILD"
# Tests run under mpirun check everything but leaks: Open MPI's plugins keep allocations past
# MPI_Finalize and are unloaded by then, so their reports cannot be suppressed by library.
selected=$(ctest -N -R "$REGEX" | sed -n 's/^ *Test *#[0-9]*: *//p')
mpi=$(echo "$selected" | grep -E 'mpi' | paste -sd'|' || true)
status=0
nice -n 19 ctest -R "$REGEX" ${mpi:+-E "^($mpi)\$"} --output-on-failure -j 1 || status=1
if [ -n "$mpi" ]; then
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" nice -n 19 ctest -R "^($mpi)\$" \
    --output-on-failure -j 1 || status=1
fi
exit $status
