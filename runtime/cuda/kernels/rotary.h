// Rotary embeddings (rotary.cu; cpu/kernels/rotary.cc), forward and gradient.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_data.h"

namespace dtc::cuda::kernels {

// n elements of rows of D, `heads` consecutive rows at each of T positions in turn, against
// tables [T, D]; `transpose`: the gradient.
cudaError_t rotary(FloatIn x, FloatIn cos, FloatIn sin, FloatOut y, int64_t n, int64_t t, int64_t d,
                   int64_t heads, bool transpose, cudaStream_t stream);

}  // namespace dtc::cuda::kernels
