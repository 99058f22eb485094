// Thread control of the BLAS library behind cpu::matmul.
#pragma once

namespace dtc::cpu {

// Makes BLAS use `threads` threads (0: all hardware threads). The runtime sets 1: cpu::matmul
// splits GEMMs over its own pool instead.
void setBlasThreads(int threads);

}  // namespace dtc::cpu
