// The single-threaded sgemm call the GEMM kernels (matmul.cc, batch_matmul.cc) build on.
#pragma once

#include <cstdint>

namespace dtc::cpu {

// Below this many multiply-adds, a GEMM is not worth splitting into pool tasks.
inline constexpr int64_t kMinGemmFlopsPerTask = int64_t{1} << 18;

// Row-major C[M,N] (leading dimension ldc) = op(A)·op(B) through OpenBLAS, on the calling
// thread. A is [M,K] or [K,M] with leading dimension lda, B is [K,N] or [N,K] with ldb; k > 0.
void sgemm(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k, bool transA,
           bool transB, int64_t lda, int64_t ldb, int64_t ldc);

}  // namespace dtc::cpu
