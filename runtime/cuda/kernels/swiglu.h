// SwiGLU's gate, fused (swiglu.cu; cpu/kernels/swiglu.cc): silu(gate) · up, and its gradients.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_data.h"

namespace dtc::cuda::kernels {

cudaError_t swiglu(FloatIn gate, FloatIn up, FloatOut y, int64_t n, cudaStream_t stream);
cudaError_t swigluGrad(FloatIn dy, FloatIn gate, FloatIn up, FloatOut dgate, FloatOut dup,
                       int64_t n, cudaStream_t stream);

}  // namespace dtc::cuda::kernels
