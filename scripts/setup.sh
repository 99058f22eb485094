#!/usr/bin/env bash
# Installs every build and test dependency: Debian's packages; from PyPI, TensorBoard's event
# reader (for a test) and, where the CUDA toolkit is present, the cuDNN frontend's headers.
# Idempotent: a machine that already has them all returns at once without touching apt or the
# network.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The cuDNN frontend (header-only; the CUDA backend's attention through cuDNN, which it loads at
# run time) from its PyPI wheel, into .deps/ (ignored by git): only the headers are kept. The
# wheel is platform-tagged but the headers are not, so any Python with pip fetches it.
CUDNN_FRONTEND_VERSION=1.32.0
CUDNN_FRONTEND_DIR="$ROOT/.deps/cudnn-frontend"
fetch_cudnn_frontend() {
  if [ "$(cat "$CUDNN_FRONTEND_DIR/version" 2>/dev/null)" = "$CUDNN_FRONTEND_VERSION" ]; then return 0; fi
  if ! command -v nvcc > /dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then return 0; fi
  echo "setup: fetching the cuDNN frontend's headers ($CUDNN_FRONTEND_VERSION)"
  local tmp
  tmp="$(mktemp -d)"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"
  rm -rf "$CUDNN_FRONTEND_DIR.partial" && mkdir -p "$CUDNN_FRONTEND_DIR.partial"
  python3 - "$tmp"/nvidia_cudnn_frontend-*.whl "$CUDNN_FRONTEND_DIR.partial" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1:3]
with zipfile.ZipFile(wheel) as z:
    z.extractall(out, [n for n in z.namelist() if n.startswith("include/")])
PY
  echo "$CUDNN_FRONTEND_VERSION" > "$CUDNN_FRONTEND_DIR.partial/version"
  rm -rf "$CUDNN_FRONTEND_DIR" "$tmp" && mv "$CUDNN_FRONTEND_DIR.partial" "$CUDNN_FRONTEND_DIR"
}
fetch_cudnn_frontend

# TensorBoard's event reader, for the test that reads dtrun --tensorboard's files back: pure
# Python wheels unpacked into .deps/python (the test puts it on sys.path; Debian's protobuf
# serves it). 2.15 is the newest whose generated protos run on Debian's protobuf 4.21.
TENSORBOARD_VERSION=2.15.2
PYDEPS_DIR="$ROOT/.deps/python"
fetch_tensorboard() {
  if [ "$(cat "$PYDEPS_DIR/version" 2>/dev/null)" = "tensorboard-$TENSORBOARD_VERSION" ]; then return 0; fi
  echo "setup: fetching TensorBoard's event reader ($TENSORBOARD_VERSION)"
  local tmp
  tmp="$(mktemp -d)"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" \
    "tensorboard==$TENSORBOARD_VERSION" "absl-py==2.1.0"
  rm -rf "$PYDEPS_DIR.partial" && mkdir -p "$PYDEPS_DIR.partial"
  python3 - "$PYDEPS_DIR.partial" "$tmp"/*.whl <<'PY'
import sys, zipfile
out, wheels = sys.argv[1], sys.argv[2:]
for wheel in wheels:
    zipfile.ZipFile(wheel).extractall(out)
PY
  echo "tensorboard-$TENSORBOARD_VERSION" > "$PYDEPS_DIR.partial/version"
  rm -rf "$PYDEPS_DIR" "$tmp" && mv "$PYDEPS_DIR.partial" "$PYDEPS_DIR"
}

# transformers, pinned, in a virtual environment that sees Debian's torch and numpy: the parity
# tests build Hugging Face's own model classes (from configs; no weights are downloaded).
# ml_dtypes: NumPy's float8 types, the FP8 references.
HF_VENV="$ROOT/.deps/hf-venv"
HF_REQUIREMENTS=(transformers==4.44.2 tokenizers==0.19.1 safetensors==0.8.0 huggingface_hub==0.36.2
  filelock==4.3.1 fsspec==2026.9.0 packaging==26.4 regex==2026.11.19 tqdm==4.70.1 hf-xet==1.8.0
  ml_dtypes==0.4.1)
fetch_transformers() {
  if [ "$(cat "$HF_VENV/version" 2>/dev/null)" = "${HF_REQUIREMENTS[*]}" ]; then return 0; fi
  echo "setup: making $HF_VENV (${HF_REQUIREMENTS[0]})"
  rm -rf "$HF_VENV"
  /usr/bin/python3 -m venv --system-site-packages "$HF_VENV"
  "$HF_VENV/bin/python" -m pip install -q --no-deps "${HF_REQUIREMENTS[@]}"
  "$HF_VENV/bin/python" -c "import transformers, torch"
  echo "${HF_REQUIREMENTS[*]}" > "$HF_VENV/version"
}

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libflatbuffers-dev flatbuffers-compiler
  libopenblas-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev
  python3-torch python3-numpy python3-venv python3-pip
  dataset-fashion-mnist fortunes
  zlib1g-dev libisal2
  libonnx-dev libprotobuf-dev python3-onnx libonnx-testdata
  clang-format-14
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  fetch_tensorboard
  fetch_transformers
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fetch_tensorboard
fetch_transformers
