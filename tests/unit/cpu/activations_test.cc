#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

// Double references of the forward functions; gradients are checked against their central
// finite differences, so the analytic formulas in the kernels are tested independently.
double refRelu(double x) { return x > 0 ? x : 0; }
double refTanh(double x) { return std::tanh(x); }
double refGeluExact(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double refGeluTanh(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double centralDifference(const std::function<double(double)>& f, double x) {
  const double h = 1e-6;
  return (f(x + h) - f(x - h)) / (2 * h);
}

std::vector<double> mapRef(const std::vector<float>& x, const std::function<double(double)>& f) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f(x[i]);
  return out;
}

// dy · f'(x) with f' from finite differences.
std::vector<double> fdGrad(const std::vector<float>& dy, const std::vector<float>& x,
                           const std::function<double(double)>& f) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = dy[i] * centralDifference(f, x[i]);
  return out;
}

// Inputs in [-4, 4], kept away from relu's kink at 0 where no derivative exists.
std::vector<float> inputs(int64_t n, uint32_t seed) {
  auto x = randomFloats(n, seed, -4.0f, 4.0f);
  for (float& v : x)
    if (std::abs(v) < 1e-3f) v = 0.5f;
  return x;
}

class ActivationTest : public PoolTest {};

const int64_t kSizes[] = {1, 17, 16384, 100003};

TEST_P(ActivationTest, ForwardMatchesReference) {
  for (int64_t n : kSizes) {
    const auto x = inputs(n, 1 + n);
    std::vector<float> y(n);
    const std::string sz = " n=" + std::to_string(n);
    relu(x.data(), y.data(), n, pool_);
    expectClose(y, mapRef(x, refRelu), 0, 0, "relu" + sz);
    tanhForward(x.data(), y.data(), n, pool_);
    expectClose(y, mapRef(x, refTanh), 1e-5, 1e-7, "tanh" + sz);
    gelu(x.data(), y.data(), n, false, pool_);
    expectClose(y, mapRef(x, refGeluExact), 1e-5, 1e-6, "gelu exact" + sz);
    gelu(x.data(), y.data(), n, true, pool_);
    expectClose(y, mapRef(x, refGeluTanh), 1e-5, 1e-6, "gelu tanh" + sz);
  }
}

TEST_P(ActivationTest, TanhAcrossItsRange) {
  // Both sides of the switch between the polynomial and the exp form, tiny and saturated
  // values, signed zeros, infinities and NaN.
  std::vector<float> x = {0.0f, -0.0f, 1e-30f, -1e-7f, 1e-3f, 0.3f,   0.6249f, 0.625f, -0.6251f,
                          1.0f, 3.0f,  -8.9f,  9.1f,   20.0f, -50.0f, 88.0f,   1e30f};
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  for (float v = -10.0f; v <= 10.0f; v += 0.01f) x.push_back(v);
  std::vector<float> y(x.size());
  tanhForward(x.data(), y.data(), static_cast<int64_t>(x.size()), pool_);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::tanh(static_cast<double>(x[i]));
    EXPECT_LE(std::abs(y[i] - want), 2.5e-7 * std::abs(want) + 1e-45) << "tanh(" << x[i] << ")";
    EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "tanh(" << x[i] << ")";
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float out = 0.0f;
  tanhForward(&nan, &out, 1, pool_);
  EXPECT_TRUE(std::isnan(out));
}

TEST_P(ActivationTest, GradientsMatchFiniteDifferences) {
  for (int64_t n : kSizes) {
    const auto x = inputs(n, 2 + n);
    const auto dy = randomFloats(n, 3 + n);
    std::vector<float> dx(n);
    const std::string sz = " n=" + std::to_string(n);
    reluGrad(dy.data(), x.data(), dx.data(), n, pool_);
    expectClose(dx, fdGrad(dy, x, refRelu), 1e-6, 1e-7, "relu grad" + sz);
    // tanhGrad takes y = tanh(x) as the kernel's forward produced it.
    std::vector<float> y(n);
    tanhForward(x.data(), y.data(), n, pool_);
    tanhGrad(dy.data(), y.data(), dx.data(), n, pool_);
    expectClose(dx, fdGrad(dy, x, refTanh), 1e-5, 1e-6, "tanh grad" + sz);
    geluGrad(dy.data(), x.data(), dx.data(), n, false, pool_);
    expectClose(dx, fdGrad(dy, x, refGeluExact), 1e-5, 1e-6, "gelu exact grad" + sz);
    geluGrad(dy.data(), x.data(), dx.data(), n, true, pool_);
    expectClose(dx, fdGrad(dy, x, refGeluTanh), 1e-5, 1e-6, "gelu tanh grad" + sz);
  }
}

TEST_P(ActivationTest, ReluGradientAtZeroIsZero) {
  const std::vector<float> x{0.0f, -0.0f, 1.0f}, dy{5.0f, 5.0f, 5.0f};
  std::vector<float> dx(3);
  reluGrad(dy.data(), x.data(), dx.data(), 3, pool_);
  EXPECT_EQ(dx, (std::vector<float>{0.0f, 0.0f, 5.0f}));
}

// Writing into the input buffer must give exactly the out-of-place result.
TEST_P(ActivationTest, InPlaceMatchesOutOfPlace) {
  const int64_t n = 50001;
  const auto x = inputs(n, 7);
  const auto dy = randomFloats(n, 8);
  using Unary = std::function<void(const float*, float*)>;
  const std::pair<const char*, Unary> forwards[] = {
      {"relu", [&](const float* in, float* out) { relu(in, out, n, pool_); }},
      {"tanh", [&](const float* in, float* out) { tanhForward(in, out, n, pool_); }},
      {"gelu", [&](const float* in, float* out) { gelu(in, out, n, false, pool_); }},
      {"gelu tanh", [&](const float* in, float* out) { gelu(in, out, n, true, pool_); }},
      {"relu grad", [&](const float* in, float* out) { reluGrad(dy.data(), in, out, n, pool_); }},
      {"tanh grad", [&](const float* in, float* out) { tanhGrad(dy.data(), in, out, n, pool_); }},
      {"gelu grad",
       [&](const float* in, float* out) { geluGrad(dy.data(), in, out, n, false, pool_); }},
      {"gelu tanh grad",
       [&](const float* in, float* out) { geluGrad(dy.data(), in, out, n, true, pool_); }},
  };
  for (const auto& [name, fn] : forwards) {
    std::vector<float> separate(n), inPlace = x;
    fn(x.data(), separate.data());
    fn(inPlace.data(), inPlace.data());
    EXPECT_EQ(separate, inPlace) << name;
  }
  // The gradient buffer may also be the one overwritten.
  std::vector<float> separate(n), inPlace = dy;
  geluGrad(dy.data(), x.data(), separate.data(), n, false, pool_);
  geluGrad(inPlace.data(), x.data(), inPlace.data(), n, false, pool_);
  EXPECT_EQ(separate, inPlace) << "gelu grad into dy";
}

DTC_INSTANTIATE_POOL_TEST(ActivationTest);

}  // namespace
}  // namespace dtc::cpu
