// RMSNorm (as transformers' LlamaRMSNorm, in float32) and its gradient.
#pragma once

#include <cstdint>

#include "support/thread_pool.h"

namespace dtc::cpu {

// RMSNorm over the last dimension C of `rows` rows (LlamaRMSNorm): y = x·rstd·w with
// rstd = 1/sqrt(mean(x²) + eps), written [rows].
void rmsNorm(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t c,
             float eps, ThreadPool& pool);
// Gradients from the saved rstd: dx [rows, C], dw [C] (overwritten).
void rmsNormGrad(const float* dy, const float* x, const float* w, const float* rstd, float* dx,
                 float* dw, int64_t rows, int64_t c, ThreadPool& pool);

}  // namespace dtc::cpu
