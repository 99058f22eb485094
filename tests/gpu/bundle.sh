#!/usr/bin/env bash
# Run HERE, after tests/gpu/prepare.sh: builds the runtime for the lent GPU machine and packs it
# into gpu-carry/bundle.tar.xz, because that machine's image has CUDA, PyTorch, CMake and ninja
# but no flatc, FlatBuffers headers, BLAS or MPI to build dtrun with, and cannot download them.
# The bundle mirrors a build directory (tools/dtrun/dtrun beside libdtc_cuda.so for sm_90,
# tests/gpu/kernels_test) and carries what those link that the image lacks: OpenBLAS (with
# libgfortran and libquadmath) and MPICH from its PyPI wheel (libmpi.so.12, its fabric
# libraries, the Hydra launcher mpiexec), which dtrun is built against here for that reason.
# env.sh sets the library path (and finds the CUDA, NCCL and cuDNN libraries PyTorch brings there);
# tests/gpu/run.sh and bench/gpu_gpt2.sh use the bundle when they find it.
#   tests/gpu/bundle.sh [BUILD_DIR]   (default: build-bundle)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${1:-$ROOT/build-bundle}"
CARRY="$ROOT/gpu-carry"
MPICH_VERSION=5.0.2
[ -d "$CARRY" ] || { echo "no $CARRY: run tests/gpu/prepare.sh first"; exit 1; }

# MPICH from PyPI (the same files are unpacked on the GPU machine from the bundle).
WHEELS="$BUILD/wheels"
mkdir -p "$WHEELS"
if ! ls "$WHEELS"/mpich-"$MPICH_VERSION"-*.whl >/dev/null 2>&1; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$WHEELS" "mpich==$MPICH_VERSION"
fi
MPICH="$BUILD/mpich"
rm -rf "$MPICH" && mkdir -p "$MPICH"
python3 -m zipfile -e "$(ls "$WHEELS"/mpich-"$MPICH_VERSION"-*.whl | head -1)" "$MPICH/wheel"
M="$MPICH/wheel/mpich-$MPICH_VERSION.data/data"
chmod +x "$M/bin/"*  # zipfile does not keep the launcher's mode bits

# FindMPI told exactly which MPI to use (pkg-config would find this machine's Open MPI).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTC_BUILD_COMPILER=OFF -DDTC_BUILD_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_C_HEADER_DIR="$M/include" \
  -DMPI_C_INCLUDE_PATH="$M/include" -DMPI_C_ADDITIONAL_INCLUDE_DIRS= -DMPI_C_COMPILE_OPTIONS= \
  -DMPI_C_LINK_FLAGS= -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY="$M/lib/libmpi.so.12" \
  -DMPIEXEC_EXECUTABLE="$M/bin/mpiexec" > "$BUILD/bundle-configure.log" 2>&1 ||
  { cat "$BUILD/bundle-configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target dtrun dtc_cuda kernels_test

STAGE="$BUILD/bundle"
rm -rf "$STAGE" && mkdir -p "$STAGE/tools/dtrun" "$STAGE/tests/gpu" "$STAGE/lib" "$STAGE/mpich"
cp "$BUILD/tools/dtrun/dtrun" "$BUILD/tools/dtrun/libdtc_cuda.so" "$STAGE/tools/dtrun/"
cp "$BUILD/tests/gpu/kernels_test" "$STAGE/tests/gpu/"
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp "$(readlink -f "/lib/x86_64-linux-gnu/$lib")" "$STAGE/lib/$lib"
done
cp -r "$M/bin" "$M/lib" "$STAGE/mpich/"
rm -f "$STAGE/mpich/lib/libmpi_abi.so"* "$STAGE/mpich/bin/"*_abi  # the MPI ABI variant: not used
cat > "$STAGE/env.sh" <<'ENV'
# Sourced by tests/gpu/run.sh and bench/gpu_gpt2.sh: the bundle's libraries and launcher, and the
# CUDA, NCCL and cuDNN libraries of the machine (its toolkit, or PyTorch's nvidia-* packages).
BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
extra=""
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib; do if [ -d "$dir" ]; then extra="$extra:$dir"; fi; done
py_nvidia="$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0] + "/x"))' 2>/dev/null || true)"
if [ -n "$py_nvidia" ]; then
  # The layout differs between releases (nvidia/<lib>/lib, nvidia/cu13/lib): look for the files.
  # cuDNN loads its engine libraries from its own directory by name: that directory goes on the
  # path too.
  for name in libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudnn.so.9; do
    found="$(find "$py_nvidia" -maxdepth 4 -name "$name" 2>/dev/null | head -1 || true)"
    if [ -n "$found" ]; then
      extra="$extra:$(dirname "$found")"
      if [ "$name" = libnccl.so.2 ] && [ -z "${DTC_NCCL_LIBRARY:-}" ]; then export DTC_NCCL_LIBRARY="$found"; fi
      if [ "$name" = libcudnn.so.9 ] && [ -z "${DTC_CUDNN_LIBRARY:-}" ]; then export DTC_CUDNN_LIBRARY="$found"; fi
    fi
  done
fi
export LD_LIBRARY_PATH="$BUNDLE/mpich/lib:$BUNDLE/lib${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$BUNDLE/mpich/bin:$PATH"
MPIRUN=(mpiexec -n)
ENV
tar -C "$STAGE" -cJf "$CARRY/bundle.tar.xz" .
echo "wrote $CARRY/bundle.tar.xz ($(du -h "$CARRY/bundle.tar.xz" | cut -f1)); gpu-carry in all: $(du -sh "$CARRY" | cut -f1)"
