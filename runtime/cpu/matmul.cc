// matmul through OpenBLAS sgemm. BLAS does its own threading, so this kernel ignores the pool.
#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <climits>

#include "cpu/kernels.h"

namespace dtc::cpu {

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
            bool transA, bool transB) {
  if (m <= 0 || n <= 0) return;
  // An empty inner dimension gives zeros; handled here because sgemm rejects lda == 0.
  if (k <= 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  // cblas takes 32-bit ints (OpenBLAS without INTERFACE64).
  assert(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX);
  // Row-major leading dimensions: A is [M,K] or [K,M], B is [K,N] or [N,K], C is [M,N].
  const int lda = static_cast<int>(transA ? m : k);
  const int ldb = static_cast<int>(transB ? k : n);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, lda, b, ldb, 0.0f, c, static_cast<int>(n));
}

}  // namespace dtc::cpu
