// Rotary embeddings and their gradient.
#pragma once

#include <cstdint>

#include "support/thread_pool.h"

namespace dtc::cpu {

// Rotary embeddings over n elements of rows of D, `heads` consecutive rows at each of T positions
// in turn (tables cos, sin [T, D]): y = x·cos + rotate_half(x)·sin; with `transpose`, the
// gradient's dy·cos + rotate_halfᵀ(dy·sin).
void rotary(const float* x, const float* cos, const float* sin, float* y, int64_t n, int64_t t,
            int64_t d, int64_t heads, bool transpose, ThreadPool& pool);

}  // namespace dtc::cpu
