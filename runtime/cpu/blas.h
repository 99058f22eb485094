// Thread control of the BLAS library behind cpu::matmul.
#pragma once

namespace dtc::cpu {

// Makes BLAS use `threads` threads (0: all hardware threads), like the element-wise kernels.
void setBlasThreads(int threads);

}  // namespace dtc::cpu
