// SwiGLU's gate, fused: silu(gate)·up, and its gradient.
#pragma once

#include <cstdint>

#include "support/thread_pool.h"

namespace dtc::cpu {

// SwiGLU's gate over n elements: y = silu(gate)·up; and its gradients.
void swiglu(const float* gate, const float* up, float* y, int64_t n, ThreadPool& pool);
void swigluGrad(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                int64_t n, ThreadPool& pool);

}  // namespace dtc::cpu
