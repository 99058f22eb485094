#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

// Double references. Cross-entropy uses the plain (unshifted) log-sum-exp on purpose, so the
// kernel's max-subtracted form is checked against an independent formula; inputs are kept
// small enough for it not to overflow.
double refCrossEntropy(const std::vector<double>& logits, const std::vector<int64_t>& labels,
                       int64_t rows, int64_t classes) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < classes; ++c) s += std::exp(logits[r * classes + c]);
    total += std::log(s) - logits[r * classes + labels[r]];
  }
  return total / rows;
}

double refMse(const std::vector<double>& pred, const std::vector<float>& target) {
  double s = 0;
  for (size_t i = 0; i < pred.size(); ++i) s += (pred[i] - target[i]) * (pred[i] - target[i]);
  return s / pred.size();
}

std::vector<double> toDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// dloss · ∂f/∂x_i by central differences of a double reference f.
template <typename F>
std::vector<double> fdGradient(std::vector<double> x, double dloss, F f) {
  const double h = 1e-6;
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    g[i] = dloss * (up - down) / (2 * h);
  }
  return g;
}

std::vector<int64_t> randomLabels(int64_t rows, int64_t classes, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, classes - 1);
  std::vector<int64_t> labels(rows);
  for (auto& l : labels) l = dist(gen);
  return labels;
}

class LossTest : public PoolTest {};

TEST_P(LossTest, SoftmaxCrossEntropyMatchesReference) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {4, 10}, {37, 1000}, {3000, 7}, {3, 40000}};
  for (const auto& [rows, classes] : shapes) {
    const auto logits = randomFloats(rows * classes, rows + classes, -8.0f, 8.0f);
    const auto labels = randomLabels(rows, classes, rows * classes);
    float loss = -1;
    ASSERT_TRUE(softmaxCrossEntropy(logits.data(), labels.data(), rows, classes, &loss, pool_));
    expectClose(loss, refCrossEntropy(toDouble(logits), labels, rows, classes), 1e-5, 1e-6,
                "loss " + std::to_string(rows) + "x" + std::to_string(classes));
  }
}

TEST_P(LossTest, SoftmaxCrossEntropyIsStableForHugeLogits) {
  // Unshifted exp would overflow; the answer is the same as for logits shifted by −1000.
  const int64_t rows = 5, classes = 6;
  const auto small = randomFloats(rows * classes, 9, -3.0f, 3.0f);
  std::vector<float> huge(small);
  for (float& v : huge) v += 1000.0f;
  const auto labels = randomLabels(rows, classes, 10);
  float loss = 0;
  ASSERT_TRUE(softmaxCrossEntropy(huge.data(), labels.data(), rows, classes, &loss, pool_));
  // Adding 1000 in float rounds each logit to a multiple of 2^-14; compare to those values.
  std::vector<double> shifted(huge.begin(), huge.end());
  for (double& v : shifted) v -= 1000.0;
  expectClose(loss, refCrossEntropy(shifted, labels, rows, classes), 1e-5, 1e-6, "huge");
}

TEST_P(LossTest, SlicesWithTheGlobalDivisorSumToTheBatchMean) {
  // What a data-parallel device computes: its rows' losses divided by the whole batch's rows.
  const int64_t rows = 12, classes = 5, parts = 4, slice = rows / parts;
  const auto logits = randomFloats(rows * classes, 3, -4.0f, 4.0f);
  const auto labels = randomLabels(rows, classes, 4);
  float whole = 0;
  ASSERT_TRUE(softmaxCrossEntropy(logits.data(), labels.data(), rows, classes, &whole, pool_));
  double sum = 0;
  std::vector<float> grads(rows * classes), wholeGrad(rows * classes);
  const float dloss = 1.5f;
  softmaxCrossEntropyGrad(&dloss, logits.data(), labels.data(), rows, classes, wholeGrad.data(),
                          pool_);
  for (int64_t p = 0; p < parts; ++p) {
    float part = 0;
    ASSERT_TRUE(softmaxCrossEntropy(logits.data() + p * slice * classes, labels.data() + p * slice,
                                    slice, classes, &part, pool_, rows));
    sum += part;
    softmaxCrossEntropyGrad(&dloss, logits.data() + p * slice * classes, labels.data() + p * slice,
                            slice, classes, grads.data() + p * slice * classes, pool_, rows);
  }
  expectClose(static_cast<float>(sum), whole, 1e-6, 1e-7, "sum of slices");
  for (size_t i = 0; i < grads.size(); ++i) ASSERT_EQ(grads[i], wholeGrad[i]) << i;

  const auto pred = randomFloats(rows, 5, -1.0f, 1.0f), target = randomFloats(rows, 6, -1.0f, 1.0f);
  float mseWhole = 0, mseSum = 0;
  mse(pred.data(), target.data(), rows, &mseWhole, pool_);
  for (int64_t p = 0; p < parts; ++p) {
    float part = 0;
    mse(pred.data() + p * slice, target.data() + p * slice, slice, &part, pool_, rows);
    mseSum += part;
  }
  expectClose(mseSum, mseWhole, 1e-6, 1e-7, "mse slices");
}

TEST_P(LossTest, SoftmaxCrossEntropyRejectsOutOfRangeLabels) {
  const std::vector<float> logits(3 * 4, 0.5f);
  float loss = 0;
  for (int64_t bad : {int64_t{-1}, int64_t{4}, int64_t{1000}}) {
    const std::vector<int64_t> labels{0, bad, 3};
    EXPECT_FALSE(softmaxCrossEntropy(logits.data(), labels.data(), 3, 4, &loss, pool_)) << bad;
  }
  const std::vector<int64_t> ok{0, 3, 2};
  EXPECT_TRUE(softmaxCrossEntropy(logits.data(), ok.data(), 3, 4, &loss, pool_));
  expectClose(loss, std::log(4.0), 1e-6, 0, "uniform logits");
}

TEST_P(LossTest, SoftmaxCrossEntropyGradMatchesFiniteDifferences) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {1, 5}, {6, 7}, {20, 33}};
  const float dloss = 0.7f;
  for (const auto& [rows, classes] : shapes) {
    const auto logits = randomFloats(rows * classes, 3 * rows + classes, -4.0f, 4.0f);
    const auto labels = randomLabels(rows, classes, rows + 2 * classes);
    std::vector<float> got(rows * classes);
    softmaxCrossEntropyGrad(&dloss, logits.data(), labels.data(), rows, classes, got.data(), pool_);
    const auto want = fdGradient(toDouble(logits), dloss, [&](const std::vector<double>& x) {
      return refCrossEntropy(x, labels, rows, classes);
    });
    expectClose(got, want, 1e-5, 1e-7,
                "ce grad " + std::to_string(rows) + "x" + std::to_string(classes));
  }
}

// Large shapes (too big for finite differences) against the closed form, and in place.
TEST_P(LossTest, SoftmaxCrossEntropyGradLargeAndInPlace) {
  const int64_t rows = 3000, classes = 37;
  const float dloss = 1.3f;
  const auto logits = randomFloats(rows * classes, 11, -6.0f, 6.0f);
  const auto labels = randomLabels(rows, classes, 12);
  std::vector<double> want(rows * classes);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < classes; ++c) s += std::exp(double(logits[r * classes + c]));
    for (int64_t c = 0; c < classes; ++c)
      want[r * classes + c] =
          dloss * (std::exp(double(logits[r * classes + c])) / s - (c == labels[r])) / rows;
  }
  std::vector<float> got(rows * classes);
  softmaxCrossEntropyGrad(&dloss, logits.data(), labels.data(), rows, classes, got.data(), pool_);
  expectClose(got, want, 1e-5, 1e-10, "ce grad large");
  std::vector<float> inPlace = logits;
  softmaxCrossEntropyGrad(&dloss, inPlace.data(), labels.data(), rows, classes, inPlace.data(),
                          pool_);
  EXPECT_EQ(inPlace, got);
}

// The vocabulary-split pieces (each device a block of every row's classes, the row maxima and
// sums combined between the steps, as the all-reduces do) give the whole loss and its gradient,
// with an ignored label, and the gradient in place.
TEST_P(LossTest, VocabularySplitPiecesMatchTheWholeLoss) {
  const int64_t rows = 9, classes = 11, cut = 4;
  const IgnoredLabel ignored{true, -100};
  const auto logits = randomFloats(rows * classes, 13, -5.0f, 5.0f);
  auto labels = randomLabels(rows, classes, 14);
  labels[2] = -100;
  float whole = 0;
  ASSERT_TRUE(softmaxCrossEntropy(logits.data(), labels.data(), rows, classes, &whole, pool_,
                                  rows - 1, ignored));
  const float dloss = 0.7f;
  std::vector<float> wholeGrad(rows * classes);
  softmaxCrossEntropyGrad(&dloss, logits.data(), labels.data(), rows, classes, wholeGrad.data(),
                          pool_, rows - 1, ignored);

  const int64_t offsets[2] = {0, cut}, widths[2] = {cut, classes - cut};
  std::vector<std::vector<float>> blocks(2);
  for (int b = 0; b < 2; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < widths[b]; ++c)
        blocks[b].push_back(logits[r * classes + offsets[b] + c]);
  std::vector<float> rowMax(rows, -INFINITY), sumExp(rows, 0.0f), target(rows, 0.0f), part(rows);
  for (int b = 0; b < 2; ++b) {
    crossEntropyRowMax(blocks[b].data(), rows, widths[b], part.data(), pool_);
    for (int64_t r = 0; r < rows; ++r) rowMax[r] = std::max(rowMax[r], part[r]);
  }
  for (int b = 0; b < 2; ++b) {
    std::vector<float> s(rows), t(rows);
    crossEntropyParts(blocks[b].data(), labels.data(), rowMax.data(), rows, widths[b], offsets[b],
                      s.data(), t.data(), pool_);
    for (int64_t r = 0; r < rows; ++r) sumExp[r] += s[r], target[r] += t[r];
  }
  const float split = crossEntropyCombine(rowMax.data(), sumExp.data(), target.data(), rows,
                                          rows - 1, labels.data(), ignored);
  EXPECT_NEAR(split, whole, 1e-6 * std::abs(whole));
  for (int b = 0; b < 2; ++b) {
    std::vector<float> grad(rows * widths[b]), inPlace = blocks[b];
    crossEntropyPartsGrad(dloss, blocks[b].data(), labels.data(), rowMax.data(), sumExp.data(),
                          rows, widths[b], offsets[b], rows - 1, grad.data(), pool_, ignored);
    crossEntropyPartsGrad(dloss, inPlace.data(), labels.data(), rowMax.data(), sumExp.data(), rows,
                          widths[b], offsets[b], rows - 1, inPlace.data(), pool_, ignored);
    EXPECT_EQ(inPlace, grad);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < widths[b]; ++c)
        EXPECT_NEAR(grad[r * widths[b] + c], wholeGrad[r * classes + offsets[b] + c], 1e-7)
            << "row " << r << " class " << offsets[b] + c;
  }
}

TEST_P(LossTest, MseMatchesReferenceAndFiniteDifferences) {
  for (int64_t n : {int64_t{1}, int64_t{9}, int64_t{16384}, int64_t{100003}}) {
    const auto pred = randomFloats(n, 20 + n, -3.0f, 3.0f);
    const auto target = randomFloats(n, 21 + n, -3.0f, 3.0f);
    float loss = -1;
    mse(pred.data(), target.data(), n, &loss, pool_);
    expectClose(loss, refMse(toDouble(pred), target), 1e-5, 0, "mse n=" + std::to_string(n));

    const float dloss = -0.4f;
    std::vector<float> got(n);
    mseGrad(&dloss, pred.data(), target.data(), n, got.data(), pool_);
    std::vector<double> want;
    if (n <= 16) {  // finite differences are O(n²)
      want = fdGradient(toDouble(pred), dloss,
                        [&](const std::vector<double>& p) { return refMse(p, target); });
    } else {
      want.resize(n);
      for (int64_t i = 0; i < n; ++i) want[i] = dloss * 2.0 * (double(pred[i]) - target[i]) / n;
    }
    expectClose(got, want, 1e-5, 1e-12, "mse grad n=" + std::to_string(n));
    std::vector<float> inPlace = pred;
    mseGrad(&dloss, inPlace.data(), target.data(), n, inPlace.data(), pool_);
    EXPECT_EQ(inPlace, got) << "mse grad in place n=" << n;
  }
}

DTC_INSTANTIATE_POOL_TEST(LossTest);

}  // namespace
}  // namespace dtc::cpu
