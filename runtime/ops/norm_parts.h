// How many parts of dy rms_norm_grad_add sums as it reads them: the input gradients of the GEMMs
// that read one norm's output (a Llama block's q, k and v projections, or its gate and up ones),
// fused by the compiler and read by both backends' kernels.
#pragma once

#include <cstddef>

namespace dtc {

inline constexpr size_t kRmsNormGradParts = 4;

}  // namespace dtc
