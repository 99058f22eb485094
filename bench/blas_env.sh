# Sourced by the bench scripts. PyTorch (Debian's) and dtrun both run on OpenBLAS, which falls
# back to SSE3 kernels on CPUs it does not recognise. dtrun picks the kernels from the CPU's
# features itself (cpu::selectBlasKernels); PyTorch does not, so give both the same choice here
# and compare kernel for kernel.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
