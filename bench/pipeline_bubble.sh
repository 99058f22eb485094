#!/usr/bin/env bash
# Pipeline bubble and step: the compiler's predictions against dtrun's measurements, for each
# schedule (see pipeline_bubble.py). Usage: bench/pipeline_bubble.sh [BUILD] [ROUNDS]
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/pipeline_bubble.py" --build "$ROOT/$BUILD" --rounds "$ROUNDS"
