#include <gtest/gtest.h>

#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::randomFloats;

struct MatmulCase {
  int64_t m, n, k;
};

// C[M,N] against a double reference; tolerance scaled by Σ|a·b|, the bound on fp32 error.
void checkMatmul(const MatmulCase& c, bool transA, bool transB, ThreadPool& pool) {
  const auto a = randomFloats(c.m * c.k, 1 + c.m * 7 + c.k);  // [M,K] or [K,M]
  const auto b = randomFloats(c.k * c.n, 2 + c.n * 5 + c.k);  // [K,N] or [N,K]
  std::vector<float> got(c.m * c.n, -123.0f);
  matmul(a.data(), b.data(), got.data(), c.m, c.n, c.k, transA, transB, pool);
  std::vector<double> want(c.m * c.n), scale(c.m * c.n);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0, sa = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double x = transA ? a[p * c.m + i] : a[i * c.k + p];
        const double y = transB ? b[j * c.k + p] : b[p * c.n + j];
        s += x * y;
        sa += std::abs(x * y);
      }
      want[i * c.n + j] = s;
      scale[i * c.n + j] = sa;
    }
  expectClose(got, want, 1e-5, 1e-7,
              "matmul m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                  " k=" + std::to_string(c.k) + " transA=" + std::to_string(transA) +
                  " transB=" + std::to_string(transB),
              &scale);
}

TEST(MatmulTest, AllTransposeCombinations) {
  // The last cases are large enough to be split over the pool, by rows (M >= N) and by columns.
  const MatmulCase cases[] = {{1, 1, 1},  {3, 5, 7},      {17, 33, 65},   {64, 1, 128},
                              {1, 70, 9}, {130, 97, 257}, {301, 64, 128}, {64, 301, 128}};
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const auto& c : cases)
      for (bool transA : {false, true})
        for (bool transB : {false, true}) checkMatmul(c, transA, transB, pool);
  }
}

TEST(MatmulTest, EmptyInnerDimensionGivesZeros) {
  std::vector<float> c(6, 5.0f);
  ThreadPool pool(1);
  matmul(nullptr, nullptr, c.data(), 2, 3, 0, false, false, pool);
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace dtc::cpu
