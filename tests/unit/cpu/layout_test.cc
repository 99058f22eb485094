// transpose, split and concat against naive index arithmetic. They are pure copies, so every
// comparison is exact.
#include <string>

#include "cpu/kernels/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::PoolTest;
using testing::randomFloats;

std::string shapeName(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// out[i0..ir] = x[j] with j[perm[d]] = i[d], one element at a time.
std::vector<float> referenceTranspose(const std::vector<float>& x, const Shape& xShape,
                                      const std::vector<int64_t>& perm) {
  const size_t rank = xShape.size();
  Shape outShape(rank), inStrides(rank);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    inStrides[d] = stride;
    stride *= xShape[d];
  }
  for (size_t d = 0; d < rank; ++d) outShape[d] = xShape[perm[d]];
  std::vector<float> out(x.size());
  for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) {
    int64_t rem = flat, src = 0;
    for (size_t d = rank; d-- > 0;) {
      src += (rem % outShape[d]) * inStrides[perm[d]];
      rem /= outShape[d];
    }
    out[flat] = x[src];
  }
  return out;
}

class LayoutTest : public PoolTest {};

TEST_P(LayoutTest, TransposeMatchesIndexingAndRoundTrips) {
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{2, 7, 3, 5}, {0, 2, 1, 3}},   // [B,T,H,D] -> [B,H,T,D] fast path
      {{3, 5, 7, 64}, {0, 2, 1, 3}},  // attention-like head size
      {{2, 7, 3, 5}, {0, 1, 3, 2}},   // last two swapped: strided inner reads
      {{2, 7, 3, 5}, {3, 1, 2, 0}},   // last dimension moves to the front
      {{2, 7, 3, 5}, {1, 3, 0, 2}},   // a full shuffle
      {{37, 41}, {1, 0}},             // matrix transpose, odd sizes
      {{300, 70}, {1, 0}},            // large enough to be split over the pool
      {{129}, {0}},                   // rank 1 (identity)
      {{2, 3, 4}, {0, 1, 2}},         // identity
      {{1, 5, 1, 3}, {2, 0, 3, 1}},   // size-1 dimensions
      {{2, 3, 1, 2, 3, 2, 1, 3}, {7, 5, 3, 1, 0, 2, 4, 6}},  // rank 8
  };
  uint32_t seed = 100;
  for (const auto& c : cases) {
    const std::string what = shapeName(c.shape) + " perm " + shapeName(c.perm);
    const auto x = randomFloats(numElements(c.shape), seed++);
    std::vector<float> y(x.size(), -7.0f);
    transpose(x.data(), c.shape, c.perm, y.data(), pool_);
    EXPECT_EQ(y, referenceTranspose(x, c.shape, c.perm)) << what;
    // Transposing back with the inverse permutation restores x exactly.
    Shape yShape(c.shape.size());
    std::vector<int64_t> inverse(c.perm.size());
    for (size_t d = 0; d < c.perm.size(); ++d) {
      yShape[d] = c.shape[c.perm[d]];
      inverse[c.perm[d]] = static_cast<int64_t>(d);
    }
    std::vector<float> back(x.size(), -7.0f);
    transpose(y.data(), yShape, inverse, back.data(), pool_);
    EXPECT_EQ(back, x) << what << " round trip";
  }
}

TEST_P(LayoutTest, TransposeOfScalarAndEmptyTensors) {
  const float x = 3.5f;
  float y = 0.0f;
  transpose(&x, {}, {}, &y, pool_);
  EXPECT_EQ(y, 3.5f);
  float untouched = 1.0f;
  transpose(nullptr, {2, 0, 3}, {2, 1, 0}, &untouched, pool_);
  EXPECT_EQ(untouched, 1.0f);
}

TEST_P(LayoutTest, SplitMatchesSlicesAndConcatInvertsIt) {
  struct Case {
    Shape shape;
    int64_t axis;
    std::vector<int64_t> sizes;
  };
  const Case cases[] = {
      {{6, 9, 12}, 0, {2, 2, 2}},
      {{6, 9, 12}, 1, {3, 3, 3}},
      {{6, 9, 12}, 2, {4, 4, 4}},
      {{6, 9, 12}, 2, {3, 3, 3, 3}},
      {{5, 7, 3 * 33}, 2, {33, 33, 33}},  // QKV split on the last axis
      {{300, 3 * 70}, 1, {70, 70, 70}},   // large enough to be split over the pool
      {{7, 5}, 1, {1, 1, 1, 1, 1}},
      {{7, 5}, 0, {1, 1, 1, 1, 1, 1, 1}},
      {{11}, 0, {11}},
      {{2, 3, 4, 5}, 1, {3}},
      {{2, 6, 1, 5}, 1, {3, 3}},
      {{6, 9, 12}, 2, {2, 7, 3}},    // unequal pieces
      {{5, 10}, 1, {1, 8, 1}},       // a slice's middle and the rest
      {{300, 90}, 1, {64, 13, 13}},  // grouped-query attention's q, k, v
      {{7, 5}, 0, {3, 4}},
  };
  uint32_t seed = 200;
  for (const auto& c : cases) {
    std::string what = shapeName(c.shape) + " axis " + std::to_string(c.axis) + " sizes";
    for (int64_t s : c.sizes) what += " " + std::to_string(s);
    const auto x = randomFloats(numElements(c.shape), seed++);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < c.axis; ++d) outer *= c.shape[d];
    for (size_t d = c.axis + 1; d < c.shape.size(); ++d) inner *= c.shape[d];
    std::vector<std::vector<float>> parts;
    for (int64_t len : c.sizes) parts.emplace_back(outer * len * inner, -7.0f);
    std::vector<float*> outs;
    for (auto& p : parts) outs.push_back(p.data());
    split(x.data(), c.shape, c.axis, c.sizes, outs, pool_);
    // Part p holds indices [start, start + sizes[p]) along the axis.
    int64_t start = 0;
    for (size_t p = 0; p < c.sizes.size(); ++p) {
      const int64_t len = c.sizes[p];
      std::vector<float> want(parts[p].size());
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t a = 0; a < len; ++a)
          for (int64_t i = 0; i < inner; ++i)
            want[(o * len + a) * inner + i] = x[(o * c.shape[c.axis] + start + a) * inner + i];
      EXPECT_EQ(parts[p], want) << what << " part " << p;
      start += len;
    }
    std::vector<const float*> ins(outs.begin(), outs.end());
    std::vector<float> back(x.size(), -7.0f);
    concat(ins, c.sizes, c.shape, c.axis, back.data(), pool_);
    EXPECT_EQ(back, x) << what;
  }
}

DTC_INSTANTIATE_POOL_TEST(LayoutTest);

}  // namespace
}  // namespace dtc::cpu
