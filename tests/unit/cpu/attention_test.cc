// causalSoftmax and its gradient against a double-precision reference; the gradient also
// against central finite differences of that reference.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "cpu/kernels/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

// y[b,i,j] = softmax_j(scale·x[b,i,j]) over j <= i, 0 above the diagonal; x is [batch, T, T].
std::vector<double> referenceSoftmax(const std::vector<double>& x, int64_t batch, int64_t t,
                                     double scale) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t r = 0; r < batch * t; ++r) {
    const int64_t i = r % t;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j <= i; ++j) m = std::max(m, scale * x[r * t + j]);
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(scale * x[r * t + j] - m);
    for (int64_t j = 0; j <= i; ++j) y[r * t + j] = std::exp(scale * x[r * t + j] - m) / sum;
  }
  return y;
}

std::vector<double> toDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct SoftmaxCase {
  int64_t batch, t;
  float scale;
};
const SoftmaxCase kCases[] = {
    {1, 1, 1.0f}, {3, 7, 0.6f}, {2, 37, 0.125f}, {5, 64, -0.3f}, {1, 129, 1.0f}};

class CausalSoftmaxTest : public PoolTest {};

TEST_P(CausalSoftmaxTest, MatchesReferenceMaskedAndNormalised) {
  uint32_t seed = 300;
  for (const auto& c : kCases) {
    const std::string what = "batch " + std::to_string(c.batch) + " t " + std::to_string(c.t);
    const auto x = randomFloats(c.batch * c.t * c.t, seed++, -4.0f, 4.0f);
    // NaN-filled output: every entry, masked ones included, must be written.
    std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
    causalSoftmax(x.data(), y.data(), c.batch, c.t, c.scale, pool_);
    expectClose(y, referenceSoftmax(toDouble(x), c.batch, c.t, c.scale), 1e-5, 1e-7, what);
    for (int64_t r = 0; r < c.batch * c.t; ++r) {
      const int64_t i = r % c.t;
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) sum += y[r * c.t + j];
      EXPECT_NEAR(sum, 1.0, 1e-5) << what << " row " << r;
      for (int64_t j = i + 1; j < c.t; ++j) ASSERT_EQ(y[r * c.t + j], 0.0f) << what;
    }
    // In place (y aliasing x) gives bit-identical results.
    std::vector<float> inPlace = x;
    causalSoftmax(inPlace.data(), inPlace.data(), c.batch, c.t, c.scale, pool_);
    EXPECT_EQ(inPlace, y) << what << " in place";
  }
}

TEST_P(CausalSoftmaxTest, LargeScoresStayFinite) {
  // exp(scale·x) would overflow fp32 without the max subtraction.
  const int64_t batch = 2, t = 33;
  const auto x = randomFloats(batch * t * t, 310, -400.0f, 400.0f);
  std::vector<float> y(x.size());
  causalSoftmax(x.data(), y.data(), batch, t, 1.0f, pool_);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  expectClose(y, referenceSoftmax(toDouble(x), batch, t, 1.0), 1e-5, 1e-7, "large scores");
}

TEST_P(CausalSoftmaxTest, GradMatchesReferenceAndFiniteDifferences) {
  uint32_t seed = 320;
  for (const auto& c : kCases) {
    const std::string what = "batch " + std::to_string(c.batch) + " t " + std::to_string(c.t);
    const int64_t n = c.batch * c.t * c.t;
    const auto x = randomFloats(n, seed++, -3.0f, 3.0f);
    const auto dy = randomFloats(n, seed++);
    std::vector<float> y(n);
    causalSoftmax(x.data(), y.data(), c.batch, c.t, c.scale, pool_);
    std::vector<float> dx(n, std::numeric_limits<float>::quiet_NaN());
    causalSoftmaxGrad(dy.data(), y.data(), dx.data(), c.batch, c.t, c.scale, pool_);

    // Analytic double reference: dx = scale·y⊙(dy − Σ dy⊙y) over unmasked entries.
    const auto yd = referenceSoftmax(toDouble(x), c.batch, c.t, c.scale);
    std::vector<double> want(n, 0.0);
    for (int64_t r = 0; r < c.batch * c.t; ++r) {
      const int64_t i = r % c.t;
      double dot = 0;
      for (int64_t j = 0; j <= i; ++j) dot += dy[r * c.t + j] * yd[r * c.t + j];
      for (int64_t j = 0; j <= i; ++j)
        want[r * c.t + j] = c.scale * yd[r * c.t + j] * (dy[r * c.t + j] - dot);
    }
    expectClose(dx, want, 1e-4, 1e-6, what + " grad");
    for (int64_t r = 0; r < c.batch * c.t; ++r)
      for (int64_t j = r % c.t + 1; j < c.t; ++j) ASSERT_EQ(dx[r * c.t + j], 0.0f) << what;

    // dx is also the gradient of L(x) = Σ dy ⊙ softmax(x); the rows are independent, so each
    // entry's central difference only needs its own row recomputed. Masked entries do not
    // affect L, so their difference is 0 as well. Only the small cases: O(n·T) work.
    if (c.t > 64) continue;
    std::vector<double> xd = toDouble(x), fd(n);
    const double h = 1e-4;
    auto rowLoss = [&](int64_t r) {
      const double* row = xd.data() + r * c.t;
      const int64_t i = r % c.t;
      double m = -std::numeric_limits<double>::infinity(), sum = 0, loss = 0;
      for (int64_t j = 0; j <= i; ++j) m = std::max(m, c.scale * row[j]);
      for (int64_t j = 0; j <= i; ++j) sum += std::exp(c.scale * row[j] - m);
      for (int64_t j = 0; j <= i; ++j)
        loss += dy[r * c.t + j] * std::exp(c.scale * row[j] - m) / sum;
      return loss;
    };
    for (int64_t e = 0; e < n; ++e) {
      const double saved = xd[e];
      xd[e] = saved + h;
      const double lp = rowLoss(e / c.t);
      xd[e] = saved - h;
      const double lm = rowLoss(e / c.t);
      xd[e] = saved;
      fd[e] = (lp - lm) / (2 * h);
    }
    expectClose(dx, fd, 1e-3, 1e-5, what + " finite differences");
  }
}

TEST_P(CausalSoftmaxTest, GradInPlaceMatchesOutOfPlace) {
  const int64_t batch = 2, t = 19;
  const auto x = randomFloats(batch * t * t, 340, -2.0f, 2.0f);
  const auto dy = randomFloats(batch * t * t, 341);
  std::vector<float> y(x.size()), dx(x.size());
  causalSoftmax(x.data(), y.data(), batch, t, 0.5f, pool_);
  causalSoftmaxGrad(dy.data(), y.data(), dx.data(), batch, t, 0.5f, pool_);
  std::vector<float> overDy = dy, overY = y;
  causalSoftmaxGrad(overDy.data(), y.data(), overDy.data(), batch, t, 0.5f, pool_);
  causalSoftmaxGrad(dy.data(), overY.data(), overY.data(), batch, t, 0.5f, pool_);
  EXPECT_EQ(overDy, dx);
  EXPECT_EQ(overY, dx);
}

DTC_INSTANTIATE_POOL_TEST(CausalSoftmaxTest);

}  // namespace
}  // namespace dtc::cpu
