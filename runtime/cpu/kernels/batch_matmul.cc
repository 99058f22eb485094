// Batched matmul through OpenBLAS sgemm. The runtime runs BLAS single-threaded
// (setBlasThreads(1)) and parallelises on its own pool, so there are two ways to use the cores:
//  - many or small GEMMs (attention's T×T×head_dim products, batch = B·H): whole batches per
//    pool task, each task calling sgemm on one thread;
//  - few large GEMMs (batch < pool size): one GEMM at a time, each split over the pool by
//    cpu::matmul.
// Never both at once: nesting parallelFor on the same pool would deadlock, and letting BLAS
// thread inside pool tasks would oversubscribe the cores.
#include <algorithm>

#include "cpu/kernels/gemm.h"
#include "cpu/kernels/transformer_kernels.h"

namespace dtc::cpu {

void batchMatmul(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t n,
                 int64_t k, bool transA, bool transB, ThreadPool& pool) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  // An empty inner dimension gives zeros; sgemm would reject lda == 0.
  if (k <= 0) {
    std::fill(c, c + batch * m * n, 0.0f);
    return;
  }
  const int64_t strideA = m * k, strideB = k * n, strideC = m * n;  // floats per batch
  const int64_t flops = m * n * k;
  const int64_t threads = pool.size();
  if (batch >= threads || flops < kMinGemmFlopsPerTask * 2) {
    // Enough batches to occupy every thread, or GEMMs too small to split: batches per task,
    // grouped so each task does at least kMinGemmFlopsPerTask of work.
    const int64_t grain = std::max<int64_t>(1, kMinGemmFlopsPerTask / flops);
    pool.parallelFor(batch, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        sgemm(a + i * strideA, b + i * strideB, c + i * strideC, m, n, k, transA, transB,
              transA ? m : k, transB ? k : n, n);
    });
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    matmul(a + i * strideA, b + i * strideB, c + i * strideC, m, n, k, transA, transB, pool);
}

}  // namespace dtc::cpu
