// batchMatmul against a double-precision reference, on both of its paths: batches spread over
// the pool (many or small GEMMs) and one GEMM at a time split by matmul (few large GEMMs).
#include <cmath>
#include <string>

#include "cpu/kernels/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

struct BatchCase {
  int64_t batch, m, n, k;
};

// Tolerance scaled by Σ|a·b| per entry, the bound on the fp32 rounding error of a dot product.
void checkBatchMatmul(const BatchCase& bc, bool transA, bool transB, ThreadPool& pool) {
  const int64_t sa = bc.m * bc.k, sb = bc.k * bc.n, sc = bc.m * bc.n;
  const auto a = randomFloats(bc.batch * sa, 11 + static_cast<uint32_t>(bc.m * 3 + bc.k));
  const auto b = randomFloats(bc.batch * sb, 12 + static_cast<uint32_t>(bc.n * 5 + bc.k));
  std::vector<float> got(bc.batch * sc, -123.0f);
  batchMatmul(a.data(), b.data(), got.data(), bc.batch, bc.m, bc.n, bc.k, transA, transB, pool);
  std::vector<double> want(got.size()), scale(got.size());
  for (int64_t p = 0; p < bc.batch; ++p)
    for (int64_t i = 0; i < bc.m; ++i)
      for (int64_t j = 0; j < bc.n; ++j) {
        double s = 0, abs = 0;
        for (int64_t q = 0; q < bc.k; ++q) {
          // a[p] is [M,K] or [K,M]; b[p] is [K,N] or [N,K].
          const double x = transA ? a[p * sa + q * bc.m + i] : a[p * sa + i * bc.k + q];
          const double y = transB ? b[p * sb + j * bc.k + q] : b[p * sb + q * bc.n + j];
          s += x * y;
          abs += std::abs(x * y);
        }
        want[p * sc + i * bc.n + j] = s;
        scale[p * sc + i * bc.n + j] = abs;
      }
  expectClose(got, want, 1e-5, 1e-7,
              "batchMatmul batch=" + std::to_string(bc.batch) + " m=" + std::to_string(bc.m) +
                  " n=" + std::to_string(bc.n) + " k=" + std::to_string(bc.k) +
                  " transA=" + std::to_string(transA) + " transB=" + std::to_string(transB),
              &scale);
}

class BatchMatmulTest : public PoolTest {};

TEST_P(BatchMatmulTest, SmallGemmsMatchReference) {
  // Odd sizes, none a multiple of a BLAS block; batch 1 and batches not a multiple of the pool.
  const BatchCase cases[] = {{1, 1, 1, 1},  {3, 5, 7, 9},     {7, 13, 1, 17},
                             {5, 1, 31, 3}, {12, 17, 17, 33}, {2, 33, 65, 7}};
  for (const auto& c : cases)
    for (bool tA : {false, true})
      for (bool tB : {false, true}) checkBatchMatmul(c, tA, tB, pool_);
}

TEST_P(BatchMatmulTest, LargeGemmsMatchReference) {
  // batch < pool size with big GEMMs: each GEMM is split over the pool by matmul. batch 4 with
  // the same sizes takes the batch-parallel path with sgemm per task instead.
  const BatchCase cases[] = {{1, 97, 65, 129}, {2, 129, 67, 97}, {4, 65, 97, 129}};
  for (const auto& c : cases)
    for (bool tA : {false, true})
      for (bool tB : {false, true}) checkBatchMatmul(c, tA, tB, pool_);
}

TEST_P(BatchMatmulTest, EmptyInnerDimensionGivesZeros) {
  std::vector<float> c(2 * 3 * 4, 5.0f);
  batchMatmul(nullptr, nullptr, c.data(), 2, 3, 4, 0, false, false, pool_);
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

TEST_P(BatchMatmulTest, EmptyBatchOrOutputTouchesNothing) {
  std::vector<float> c(4, 5.0f);
  batchMatmul(nullptr, nullptr, c.data(), 0, 2, 2, 3, false, false, pool_);
  batchMatmul(nullptr, nullptr, c.data(), 2, 0, 2, 3, false, false, pool_);
  for (float v : c) EXPECT_EQ(v, 5.0f);
}

DTC_INSTANTIATE_POOL_TEST(BatchMatmulTest);

}  // namespace
}  // namespace dtc::cpu
