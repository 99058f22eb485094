#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages. Idempotent: a machine that
# already has them all returns at once without touching apt.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libflatbuffers-dev flatbuffers-compiler
  libopenblas-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev
  python3-torch python3-numpy python3-venv
  dataset-fashion-mnist fortunes
  zlib1g-dev
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
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
