// Batched matmul through OpenBLAS sgemm. The runtime runs BLAS single-threaded
// (setBlasThreads(1)) and parallelises on its own pool, so there are two ways to use the cores:
//  - many or small GEMMs (attention's T×T×head_dim products, batch = B·H): whole batches per
//    pool task, each task calling sgemm on one thread;
//  - few large GEMMs (batch < pool size): one GEMM at a time, each split over the pool by
//    cpu::matmul.
// Never both at once: nesting parallelFor on the same pool would deadlock, and letting BLAS
// thread inside pool tasks would oversubscribe the cores.
#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <climits>

#include "cpu/transformer_kernels.h"

namespace dtc::cpu {
namespace {

// Same threshold as matmul.cc: below this many multiply-adds, a task is not worth its overhead.
constexpr int64_t kMinFlopsPerTask = 1 << 18;

void sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool transA,
           bool transB) {
  // Row-major leading dimensions: A is [M,K] or [K,M], B is [K,N] or [N,K], C is [M,N].
  const int64_t lda = transA ? m : k, ldb = transB ? k : n;
  // cblas takes 32-bit ints (OpenBLAS without INTERFACE64).
  assert(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f,
              c, static_cast<int>(n));
}

}  // namespace

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
  if (batch >= threads || flops < kMinFlopsPerTask * 2) {
    // Enough batches to occupy every thread, or GEMMs too small to split: batches per task,
    // grouped so each task does at least kMinFlopsPerTask of work.
    const int64_t grain = std::max<int64_t>(1, kMinFlopsPerTask / flops);
    pool.parallelFor(batch, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        sgemm(a + i * strideA, b + i * strideB, c + i * strideC, m, n, k, transA, transB);
    });
    return;
  }
  for (int64_t i = 0; i < batch; ++i)
    matmul(a + i * strideA, b + i * strideB, c + i * strideC, m, n, k, transA, transB, pool);
}

}  // namespace dtc::cpu
