// Batched matmul: one sgemm per batch entry. BLAS threads each GEMM; the batches run in order.
#include "cpu/transformer_kernels.h"

namespace dtc::cpu {

void batchMatmul(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                 int64_t k, bool transA, bool transB, ThreadPool&) {
  for (int64_t i = 0; i < batch; ++i)
    matmul(a + i * m * k, b + i * k * n, c + i * m * n, m, n, k, transA, transB);
}

}  // namespace dtc::cpu
