// Dropout, forward and backward alike: y = x · keepScale(element's global index), the mask drawn
// from ops/dropout_math.h as the CUDA kernel draws it. Reads element i before writing it, so y
// may alias x.
#include "cpu/kernels/kernels.h"
#include "ops/dropout_math.h"

namespace dtc::cpu {

void dropoutApply(const float* x, float* y, int64_t n, uint64_t seed, uint64_t step,
                  const dropout::Placement& placement, uint64_t key, float ratio,
                  ThreadPool& pool) {
  pool.parallelFor(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = x[i] * dropout::keepScale(seed, step, key, dropout::globalIndex(placement, i), ratio);
  });
}

}  // namespace dtc::cpu
