#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

Shape broadcastShape(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Linear index into `shape` (right-aligned) of the output multi-index `idx`.
int64_t sourceIndex(const Shape& shape, const Shape& idx) {
  int64_t linear = 0;
  const size_t offset = idx.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    linear = linear * shape[i] + (shape[i] == 1 ? 0 : idx[offset + i]);
  return linear;
}

std::vector<double> reference(BinaryOp op, const std::vector<float>& a, const Shape& aShape,
                              const std::vector<float>& b, const Shape& bShape,
                              const Shape& outShape) {
  std::vector<double> out(numElements(outShape));
  Shape idx(outShape.size());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    for (int64_t d = outShape.size() - 1, rem = i; d >= 0; --d) {
      idx[d] = rem % outShape[d];
      rem /= outShape[d];
    }
    const double x = a[sourceIndex(aShape, idx)], y = b[sourceIndex(bShape, idx)];
    out[i] = op == BinaryOp::kAdd ? x + y : op == BinaryOp::kSub ? x - y : x * y;
  }
  return out;
}

std::string shapeString(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

class BinaryTest : public PoolTest {};

TEST_P(BinaryTest, MatchesReferenceAcrossBroadcastPatterns) {
  const std::pair<Shape, Shape> cases[] = {
      {{7}, {7}},              // equal, tiny
      {{100003}, {100003}},    // equal, several uneven chunks
      {{300, 257}, {257}},     // suffix broadcast (bias add)
      {{300, 257}, {1, 257}},  // same, with an explicit leading 1
      {{257}, {300, 257}},     // a broadcast instead of b
      {{300, 257}, {300, 1}},  // column broadcast
      {{4, 1, 3}, {5, 1}},     // both operands broadcast
      {{5, 1}, {4, 1, 3}},
      {{}, {50001}},  // scalar a
      {{50001}, {}},  // scalar b
      {{1}, {1}},
      {{}, {}},
      {{6, 1}, {1, 7}},  // outer product
      {{2, 3, 4, 5}, {3, 1, 5}},
      {{2, 1, 2, 3, 1, 2, 2, 3}, {2, 1, 1, 2, 1, 3}},  // rank 8
      {{64, 1, 600}, {1, 50, 1}},                      // general path, chunks split mid-run
      {{3, 0, 4}, {4}},                                // empty output
  };
  uint32_t seed = 10;
  for (const auto& [aShape, bShape] : cases) {
    const Shape outShape = broadcastShape(aShape, bShape);
    const auto a = randomFloats(numElements(aShape), ++seed);
    const auto b = randomFloats(numElements(bShape), ++seed);
    for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul}) {
      std::vector<float> out(numElements(outShape), -99.0f);
      binary(op, a.data(), aShape, b.data(), bShape, out.data(), outShape, pool_);
      expectClose(out, reference(op, a, aShape, b, bShape, outShape), 1e-6, 1e-7,
                  shapeString(aShape) + " op" + std::to_string(static_cast<int>(op)) + " " +
                      shapeString(bShape));
    }
  }
}

TEST_P(BinaryTest, OutputMayAliasAnInputOfTheSameShape) {
  const Shape aShape{300, 257}, bShape{257};
  auto a = randomFloats(numElements(aShape), 3);
  const auto b = randomFloats(numElements(bShape), 4);
  const auto want = reference(BinaryOp::kSub, a, aShape, b, bShape, aShape);
  binary(BinaryOp::kSub, a.data(), aShape, b.data(), bShape, a.data(), aShape, pool_);
  expectClose(a, want, 1e-6, 1e-7, "in-place a");

  // out aliases b, with a broadcast along the middle axis (general path).
  const Shape cShape{20, 1, 900}, dShape{20, 30, 900};
  const auto c = randomFloats(numElements(cShape), 5);
  auto d = randomFloats(numElements(dShape), 6);
  const auto want2 = reference(BinaryOp::kMul, c, cShape, d, dShape, dShape);
  binary(BinaryOp::kMul, c.data(), cShape, d.data(), dShape, d.data(), dShape, pool_);
  expectClose(d, want2, 1e-6, 1e-7, "in-place b");
}

TEST_P(BinaryTest, FillAndNumElements) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({3, 0, 2}), 0);
  EXPECT_EQ(numElements({2, 3, 4}), 24);
  for (int64_t n : {int64_t{0}, int64_t{5}, int64_t{70001}}) {
    std::vector<float> v(n + 1, 1.0f);
    fill(v.data(), n, 2.5f, pool_);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], 2.5f) << i;
    EXPECT_EQ(v[n], 1.0f);  // nothing past the end
  }
}

DTC_INSTANTIATE_POOL_TEST(BinaryTest);

}  // namespace
}  // namespace dtc::cpu
