// Thread control of the BLAS library behind cpu::matmul.
#pragma once

namespace dtc::cpu {

// Makes BLAS use `threads` threads (0: all hardware threads). The runtime sets 1: cpu::matmul
// splits GEMMs over its own pool instead.
void setBlasThreads(int threads);

}  // namespace dtc::cpu

namespace dtc::cpu {

// OpenBLAS picks its kernels when the library loads, from the CPU model; on CPUs it does not
// recognise (common in VMs: "Intel Xeon Processor") it falls back to SSE3 kernels, 1.7x slower
// than the AVX-512 ones here. Unless OPENBLAS_CORETYPE is already set, this sets it from the
// CPU's features and re-executes the program, so the choice is made before OpenBLAS loads.
// Returns normally when there is nothing to do or the re-exec fails.
void selectBlasKernels(char** argv);

}  // namespace dtc::cpu
