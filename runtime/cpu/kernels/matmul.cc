// matmul through OpenBLAS sgemm, parallelised by our ThreadPool: the output is cut into row or
// column blocks and each task runs a single-threaded sgemm on its block. One set of threads
// owns the cores; BLAS's own threads would spin between calls and fight the pool
// (setBlasThreads(1) is called by the trainer).
#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <climits>

#include "cpu/kernels/gemm.h"
#include "cpu/kernels/kernels.h"

namespace dtc::cpu {

void sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool transA,
           bool transB, int64_t lda, int64_t ldb, int64_t ldc) {
  // cblas takes 32-bit ints (OpenBLAS without INTERFACE64).
  assert(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
         ldc <= INT_MAX);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool transA,
            bool transB, ThreadPool& pool) {
  if (m <= 0 || n <= 0) return;
  // An empty inner dimension gives zeros; handled here because sgemm rejects lda == 0.
  if (k <= 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  // Row-major leading dimensions: A is [M,K] or [K,M], B is [K,N] or [N,K], C is [M,N].
  const int64_t lda = transA ? m : k, ldb = transB ? k : n;
  const int64_t tasks =
      std::min<int64_t>(pool.size(), std::max<int64_t>(1, m * n * k / kMinGemmFlopsPerTask));
  if (tasks <= 1) return sgemm(a, b, c, m, n, k, transA, transB, lda, ldb, n);
  if (m >= n) {
    // Row blocks of C: rows of op(A) start at a + r·K ([M,K]) or a + r ([K,M]).
    pool.parallelFor(m, (m + tasks - 1) / tasks, [&](int64_t r0, int64_t r1) {
      sgemm(a + (transA ? r0 : r0 * k), b, c + r0 * n, r1 - r0, n, k, transA, transB, lda, ldb, n);
    });
  } else {
    // Column blocks of C: columns of op(B) start at b + j ([K,N]) or b + j·K ([N,K]).
    pool.parallelFor(n, (n + tasks - 1) / tasks, [&](int64_t j0, int64_t j1) {
      sgemm(a, b + (transB ? j0 * k : j0), c + j0, m, j1 - j0, k, transA, transB, lda, ldb, n);
    });
  }
}

}  // namespace dtc::cpu
