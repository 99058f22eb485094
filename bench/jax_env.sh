#!/usr/bin/env bash
# Makes BUILD/jax-venv, a virtual environment with the JAX (XLA, CPU) the benchmarks compare
# against, pinned in bench/jax-requirements.txt (with what pip resolves for it), and prints its
# python. Idempotent: an environment that already imports the pinned JAX is kept.
#   bench/jax_env.sh BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:?usage: bench/jax_env.sh BUILD_DIR}
VENV="$BUILD/jax-venv"
want=$(sed -n 's/^jax==//p' "$ROOT/bench/jax-requirements.txt")
if ! "$VENV/bin/python" -c "import jax, sys; sys.exit(jax.__version__ != '$want')" 2>/dev/null; then
  rm -rf "$VENV"
  /usr/bin/python3 -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$ROOT/bench/jax-requirements.txt" >&2
fi
echo "$VENV/bin/python"
