#!/usr/bin/env bash
# Pipeline bubble: the compiler's prediction against dtrun's measured timeline (see
# pipeline_bubble.py). Usage: bench/pipeline_bubble.sh [BUILD]
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/blas_env.sh"
exec /usr/bin/python3 "$ROOT/bench/pipeline_bubble.py" --build "$ROOT/$BUILD"
