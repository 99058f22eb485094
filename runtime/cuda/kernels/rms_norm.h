// RMSNorm's launchers (rms_norm.cu; cpu/kernels/rms_norm.cc): row sums in double, one block per
// row; the weight's gradient as column sums over row chunks fixed by the shape, added in chunk
// order: deterministic, no atomics.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "float_data.h"
#include "ops/norm_parts.h"

namespace dtc::cuda::kernels {

// With `res`, x + res is normalized and written to `sum` too (add_rms_norm).
cudaError_t rmsNorm(FloatIn x, FloatIn w, FloatOut y, FloatOut rstd, int64_t rows, int64_t c,
                    float eps, cudaStream_t stream, FloatIn res = {}, FloatOut sum = {});
// dy is the sum of `parts` (1 to kRmsNormGradParts) read left to right; with `res`, dx + res
// is written to dx and, where given, rounded into `rounded` (rms_norm_grad_add). `scratch`:
// layerNormGradScratchBytes(rows, c) (ops/cuda_scratch.h).
cudaError_t rmsNormGrad(const FloatIn* dyParts, int parts, FloatIn x, FloatIn w, FloatIn rstd,
                        FloatOut dx, FloatOut dw, int64_t rows, int64_t c, void* scratch,
                        cudaStream_t stream, FloatIn res = {}, FloatOut rounded = {});

}  // namespace dtc::cuda::kernels
