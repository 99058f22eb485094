#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;
};

// Naive double reference; also returns Σ|x| per output, the scale of the rounding error.
void reference(const std::vector<float>& x, const ReduceCase& c, std::vector<double>& out,
               std::vector<double>& scale) {
  Shape outShape;
  for (size_t d = 0; d < c.shape.size(); ++d)
    if (std::find(c.axes.begin(), c.axes.end(), static_cast<int64_t>(d)) == c.axes.end())
      outShape.push_back(c.shape[d]);
  out.assign(numElements(outShape), 0.0);
  scale.assign(out.size(), 0.0);
  Shape idx(c.shape.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    for (int64_t d = c.shape.size() - 1, rem = i; d >= 0; --d) {
      idx[d] = rem % c.shape[d];
      rem /= c.shape[d];
    }
    int64_t o = 0;
    for (size_t d = 0; d < c.shape.size(); ++d)
      if (std::find(c.axes.begin(), c.axes.end(), static_cast<int64_t>(d)) == c.axes.end())
        o = o * c.shape[d] + idx[d];
    out[o] += x[i];
    scale[o] += std::abs(x[i]);
  }
}

std::string caseName(const ReduceCase& c) {
  std::string r = "[";
  for (size_t i = 0; i < c.shape.size(); ++i) r += (i ? "," : "") + std::to_string(c.shape[i]);
  r += "] over {";
  for (size_t i = 0; i < c.axes.size(); ++i) r += (i ? "," : "") + std::to_string(c.axes[i]);
  return r + "}";
}

const ReduceCase kCases[] = {
    {{1000, 37}, {0}},    // bias gradient, narrow: row split
    {{5000, 300}, {0}},   // bias gradient, row split capped at 64 blocks
    {{20, 5000}, {0}},    // wide: parallel over column blocks
    {{3, 10}, {0}},       // tiny, inline
    {{37, 1000}, {1}},    // row sums
    {{4, 5, 6}, {1}},     // middle axis
    {{30, 70, 41}, {1}},  // middle axis, several tasks
    {{4, 5, 6}, {0, 2}},
    {{3, 4, 5, 6}, {1, 2}},
    {{2, 3, 4, 5, 6}, {0, 2, 4}},
    {{8, 1, 1000}, {0, 1}},     // size-1 axis among the reduced ones
    {{100003}, {0}},            // full reduction, uneven blocks
    {{30, 40, 50}, {0, 1, 2}},  // full reduction of a rank-3 tensor
    {{7, 1, 9}, {1}},           // only a size-1 axis: a copy
    {{5, 6}, {}},               // no axes: a copy
    {{}, {}},                   // scalar
};

class ReduceSumTest : public PoolTest {};

TEST_P(ReduceSumTest, MatchesReference) {
  uint32_t seed = 100;
  for (const auto& c : kCases) {
    const auto x = randomFloats(numElements(c.shape), ++seed);
    std::vector<double> want, scale;
    reference(x, c, want, scale);
    std::vector<float> got(want.size(), -99.0f);
    reduceSum(x.data(), c.shape, c.axes, got.data(), pool_);
    expectClose(got, want, 1e-6, 1e-7, caseName(c), &scale);
  }
}

TEST_P(ReduceSumTest, ReducingAnEmptyAxisGivesZeros) {
  std::vector<float> out(12, -1.0f);  // [3,0,4] over axis 1 → [3,4]
  reduceSum(nullptr, {3, 0, 4}, {1}, out.data(), pool_);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

// Partial-sum splits depend only on the shape, so any pool size gives bit-identical sums.
TEST_P(ReduceSumTest, IndependentOfThreadCount) {
  ThreadPool serial(1);
  uint32_t seed = 200;
  for (const auto& c : kCases) {
    const auto x = randomFloats(numElements(c.shape), ++seed);
    std::vector<double> want, scale;
    reference(x, c, want, scale);
    std::vector<float> a(want.size()), b(want.size());
    reduceSum(x.data(), c.shape, c.axes, a.data(), pool_);
    reduceSum(x.data(), c.shape, c.axes, b.data(), serial);
    EXPECT_EQ(a, b) << caseName(c);
  }
}

DTC_INSTANTIATE_POOL_TEST(ReduceSumTest);

}  // namespace
}  // namespace dtc::cpu
