#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/dropout_math.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::PoolTest;
using testing::randomFloats;

class DropoutTest : public PoolTest {};

dropout::Placement whole(const std::vector<int64_t>& shape) {
  dropout::Placement p;
  p.rank = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int k = p.rank - 1; k >= 0; --k) {
    p.local[k] = shape[k];
    p.globalStride[k] = stride;
    stride *= shape[k];
  }
  return p;
}

std::vector<float> apply(const std::vector<float>& x, const dropout::Placement& p, uint64_t seed,
                         uint64_t step, uint64_t key, float ratio, ThreadPool& pool) {
  std::vector<float> y(x.size());
  dropoutApply(x.data(), y.data(), static_cast<int64_t>(x.size()), seed, step, p, key, ratio, pool);
  return y;
}

// The dropped fraction is the ratio (within 6 standard deviations of a binomial draw), a kept
// element is exactly x / (1 − ratio) in float32, and neighbours are dropped independently.
TEST_P(DropoutTest, DropsTheRatioAndScalesTheRest) {
  const int64_t n = 1 << 20;
  const std::vector<float> x = randomFloats(n, 1, 0.5f, 2.0f);
  for (float ratio : {0.1f, 0.5f, 0.9f}) {
    const std::vector<float> y = apply(x, whole({n}), 42, 7, 1234, ratio, pool_);
    const float keep = 1.0f / (1.0f - ratio);
    int64_t dropped = 0, bothDropped = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y[i] == 0.0f) {
        ++dropped;
        if (i > 0 && y[i - 1] == 0.0f) ++bothDropped;
      } else {
        ASSERT_EQ(y[i], x[i] * keep) << "element " << i;
      }
    }
    const double sd = std::sqrt(ratio * (1 - ratio) / n);
    EXPECT_NEAR(static_cast<double>(dropped) / n, ratio, 6 * sd) << "ratio " << ratio;
    const double pairs = ratio * ratio, pairSd = std::sqrt(pairs * (1 - pairs) / n);
    EXPECT_NEAR(static_cast<double>(bothDropped) / (n - 1), pairs, 6 * pairSd) << "ratio " << ratio;
  }
  const std::vector<float> none = apply(x, whole({n}), 42, 7, 1234, 0.0f, pool_);
  EXPECT_EQ(none, x);
}

// Another step, seed or key draws an independent mask: the two agree on about p² + (1−p)² of
// the elements, not all.
TEST_P(DropoutTest, StepSeedAndKeyDrawIndependentMasks) {
  const int64_t n = 1 << 18;
  const std::vector<float> x(n, 1.0f);
  const float ratio = 0.3f;
  const std::vector<float> base = apply(x, whole({n}), 1, 0, 5, ratio, pool_);
  const std::vector<std::vector<float>> others = {apply(x, whole({n}), 1, 1, 5, ratio, pool_),
                                                  apply(x, whole({n}), 2, 0, 5, ratio, pool_),
                                                  apply(x, whole({n}), 1, 0, 6, ratio, pool_)};
  for (const std::vector<float>& other : others) {
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) same += (base[i] == 0.0f) == (other[i] == 0.0f);
    const double expected = ratio * ratio + (1 - ratio) * (1 - ratio);
    EXPECT_NEAR(static_cast<double>(same) / n, expected, 6 * std::sqrt(expected / n));
  }
}

// A device's block, placed in the global tensor, draws what the whole tensor draws there; a
// micro-batch's tensor draws what its rows draw in the step's whole batch.
TEST_P(DropoutTest, BlocksAndMicroBatchesDrawTheWholeTensorsMask) {
  const std::vector<int64_t> shape = {6, 10, 4};
  const int64_t n = 6 * 10 * 4;
  const std::vector<float> x = randomFloats(n, 3);
  const std::vector<float> full = apply(x, whole(shape), 9, 3, 77, 0.4f, pool_);
  // 2 × 5 blocks of [3, 2, 4].
  for (int64_t b0 = 0; b0 < 2; ++b0)
    for (int64_t b1 = 0; b1 < 5; ++b1) {
      dropout::Placement p = whole(shape);
      p.local[0] = 3, p.local[1] = 2;
      p.offset[0] = b0 * 3, p.offset[1] = b1 * 2;
      std::vector<float> block;
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t k = 0; k < 4; ++k)
            block.push_back(x[((b0 * 3 + i) * 10 + b1 * 2 + j) * 4 + k]);
      const std::vector<float> y = apply(block, p, 9, 3, 77, 0.4f, pool_);
      for (int64_t i = 0, e = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t k = 0; k < 4; ++k, ++e)
            ASSERT_EQ(y[e], full[((b0 * 3 + i) * 10 + b1 * 2 + j) * 4 + k])
                << "block (" << b0 << ", " << b1 << ") element " << e;
    }
  // Micro-batch 1 of two [3, 10, 4] halves: the second half of the rows.
  dropout::Placement second = whole({3, 10, 4});
  second.base = 3 * 10 * 4;
  const std::vector<float> rows(x.begin() + n / 2, x.end());
  const std::vector<float> y = apply(rows, second, 9, 3, 77, 0.4f, pool_);
  EXPECT_EQ(y, std::vector<float>(full.begin() + n / 2, full.end()));
}

DTC_INSTANTIATE_POOL_TEST(DropoutTest);

}  // namespace
}  // namespace dtc::cpu
