// Batched matmul. Attention's GEMMs are small (T×T×head_dim), so the batches are spread over
// the pool, each task running its batches' GEMMs on one thread.
#include "cpu/transformer_kernels.h"

namespace dtc::cpu {

void batchMatmul(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                 int64_t k, bool transA, bool transB, ThreadPool& pool) {
  ThreadPool serial(1);
  pool.parallelFor(batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      matmul(a + i * m * k, b + i * k * n, c + i * m * n, m, n, k, transA, transB, serial);
  });
}

}  // namespace dtc::cpu
