// Convolution, max-pooling and BatchNorm kernels against direct loops in double over the
// definitions, on geometries that exercise padding, strides, windows that do not tile the
// input, ties and every pool size.
#include <algorithm>

#include "batch_norm_case.h"
#include "cpu/kernels/conv_kernels.h"
#include "test_util.h"

namespace dtc::cpu::testing {
namespace {

struct ConvCase {
  const char* name;
  ConvGeometry g;
};

const ConvCase kConvCases[] = {
    {"same5x5", {3, 2, 9, 8, 4, 5, 5, 1, 1, 2, 2}},
    {"single_channel", {2, 1, 12, 12, 3, 5, 5, 1, 1, 2, 2}},
    {"valid3x3", {2, 3, 7, 6, 2, 3, 3, 1, 1, 0, 0}},
    {"strided", {2, 2, 9, 11, 3, 3, 3, 2, 3, 1, 2}},
    {"pointwise", {4, 5, 3, 3, 6, 1, 1, 1, 1, 0, 0}},
    {"wide_padding", {1, 2, 4, 5, 2, 3, 2, 1, 2, 3, 1}},
};

// x[s, c, y, x] of the input at an output pixel's tap, or 0 in the padding.
double tap(const std::vector<float>& x, const ConvGeometry& g, int64_t s, int64_t c, int64_t oy,
           int64_t ox, int64_t i, int64_t j) {
  const int64_t iy = oy * g.sh - g.ph + i, ix = ox * g.sw - g.pw + j;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.0;
  return x[((s * g.c + c) * g.h + iy) * g.w + ix];
}

class ConvTest : public PoolTest {};

TEST_P(ConvTest, ForwardAndGradientsMatchTheDefinition) {
  for (const ConvCase& cc : kConvCases) {
    const ConvGeometry& g = cc.g;
    const int64_t oh = g.oh(), ow = g.ow();
    const auto x = randomFloats(g.n * g.c * g.h * g.w, 1);
    const auto w = randomFloats(g.o * g.c * g.kh * g.kw, 2);
    const auto dy = randomFloats(g.n * g.o * oh * ow, 3);
    std::vector<double> y(g.n * g.o * oh * ow, 0.0), dx(x.size(), 0.0), dw(w.size(), 0.0);
    for (int64_t s = 0; s < g.n; ++s)
      for (int64_t o = 0; o < g.o; ++o)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t at = ((s * g.o + o) * oh + oy) * ow + ox;
            for (int64_t c = 0; c < g.c; ++c)
              for (int64_t i = 0; i < g.kh; ++i)
                for (int64_t j = 0; j < g.kw; ++j) {
                  const int64_t wk = ((o * g.c + c) * g.kh + i) * g.kw + j;
                  y[at] += w[wk] * tap(x, g, s, c, oy, ox, i, j);
                  dw[wk] += dy[at] * tap(x, g, s, c, oy, ox, i, j);
                  const int64_t iy = oy * g.sh - g.ph + i, ix = ox * g.sw - g.pw + j;
                  if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                    dx[((s * g.c + c) * g.h + iy) * g.w + ix] += dy[at] * w[wk];
                }
          }
    std::vector<float> gotY(y.size()), gotDx(dx.size(), 7.0f), gotDw(dw.size(), 7.0f);
    conv2d(x.data(), w.data(), gotY.data(), g, pool_);
    conv2dGradInput(dy.data(), w.data(), gotDx.data(), g, pool_);
    conv2dGradWeight(dy.data(), x.data(), gotDw.data(), g, pool_);
    const std::string name = cc.name;
    expectClose(gotY, y, 1e-5, 1e-5, name + " y");
    expectClose(gotDx, dx, 1e-5, 1e-5, name + " dx");
    expectClose(gotDw, dw, 1e-5, 1e-5, name + " dweight");
  }
}

TEST_P(ConvTest, GradWeightDoesNotDependOnThreads) {
  const ConvGeometry g{37, 3, 10, 10, 4, 3, 3, 1, 1, 1, 1};
  const auto x = randomFloats(g.n * g.c * g.h * g.w, 4);
  const auto dy = randomFloats(g.n * g.o * g.oh() * g.ow(), 5);
  std::vector<float> here(g.o * g.c * g.kh * g.kw), inline1(here.size());
  conv2dGradWeight(dy.data(), x.data(), here.data(), g, pool_);
  ThreadPool one(1);
  conv2dGradWeight(dy.data(), x.data(), inline1.data(), g, one);
  EXPECT_EQ(here, inline1);
}

struct PoolCase {
  const char* name;
  PoolGeometry g;
};

const PoolCase kPoolCases[] = {
    {"2x2", {2, 3, 8, 6, 2, 2, 2, 2}},       {"2x2_ragged", {2, 2, 7, 9, 2, 2, 2, 2}},
    {"3x3_tiled", {1, 2, 9, 6, 3, 3, 3, 3}}, {"overlapping", {2, 2, 7, 7, 3, 3, 2, 2}},
    {"gapped", {1, 2, 9, 9, 2, 2, 3, 3}},    {"rect", {2, 1, 6, 8, 1, 2, 1, 2}},
};

// The offset in a plane of the first maximum of output (oy, ox)'s window.
int64_t firstMax(const float* plane, const PoolGeometry& g, int64_t oy, int64_t ox) {
  int64_t best = -1;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t at = (oy * g.sh + i) * g.w + ox * g.sw + j;
      if (best < 0 || plane[at] > plane[best]) best = at;
    }
  return best;
}

TEST_P(ConvTest, MaxPoolPicksTheFirstMaximum) {
  for (const PoolCase& pc : kPoolCases) {
    const PoolGeometry& g = pc.g;
    const int64_t oh = g.oh(), ow = g.ow(), planeSize = g.h * g.w;
    // Values on a coarse grid, so windows hold ties, and NaNs: one is picked only where it
    // comes first in its window (nothing compares greater than it, and it never compares
    // greater), as PyTorch's strict-greater scan.
    auto x = randomFloats(g.n * g.c * planeSize, 6);
    for (float& v : x) v = std::round(v * 2.0f);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = std::nanf("");
    const auto dy = randomFloats(g.n * g.c * oh * ow, 7);
    std::vector<double> y(g.n * g.c * oh * ow), dx(x.size(), 0.0);
    for (int64_t p = 0; p < g.n * g.c; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t best = firstMax(x.data() + p * planeSize, g, oy, ox);
          y[(p * oh + oy) * ow + ox] = x[p * planeSize + best];
          dx[p * planeSize + best] += dy[(p * oh + oy) * ow + ox];
        }
    std::vector<float> gotY(y.size()), gotDx(dx.size(), 7.0f);
    maxPool2d(x.data(), gotY.data(), g, pool_);
    maxPool2dGrad(dy.data(), x.data(), gotDx.data(), g, pool_);
    const std::string name = pc.name;
    for (size_t i = 0; i < y.size(); ++i)
      if (std::isnan(y[i]) != std::isnan(gotY[i]) || (!std::isnan(y[i]) && gotY[i] != y[i]))
        ADD_FAILURE() << name << " y " << i << ": got " << gotY[i] << " want " << y[i];
    expectClose(gotDx, dx, 1e-6, 1e-6, name + " dx");
  }
}

TEST_P(ConvTest, BatchNormMatchesTheDefinition) {
  const BatchNormCase bn(5, 3, 37, 8, pool_);
  const int64_t n = bn.n, c = bn.c, s = bn.s, count = n * s;
  const std::vector<float>& x = bn.x;
  const std::vector<float>& dy = bn.dy;
  for (int64_t ch = 0; ch < c; ++ch) {
    auto at = [&](int64_t i, int64_t k) { return (i * c + ch) * s + k; };
    double mu = 0, sq = 0, g = 0, gx = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k) mu += x[at(i, k)];
    mu /= count;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k) sq += (x[at(i, k)] - mu) * (x[at(i, k)] - mu);
    const double r = 1.0 / std::sqrt(sq / count + bn.eps);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k) {
        g += dy[at(i, k)];
        gx += dy[at(i, k)] * (x[at(i, k)] - mu) * r;
      }
    const double w = bn.weight[ch], b = bn.bias[ch];
    const std::string name = "channel " + std::to_string(ch);
    expectClose(bn.mean[ch], mu, 1e-6, 1e-6, name + " mean");
    expectClose(bn.rstd[ch], r, 1e-6, 1e-6, name + " rstd");
    expectClose(bn.newRunningMean[ch], 0.9 * bn.runningMean[ch] + 0.1 * mu, 1e-6, 1e-6,
                name + " running mean");
    expectClose(bn.newRunningVar[ch], 0.9 * bn.runningVar[ch] + 0.1 * sq / (count - 1), 1e-6, 1e-6,
                name + " running var");
    expectClose(bn.dbias[ch], g, 1e-5, 1e-5, name + " dbias");
    expectClose(bn.dweight[ch], gx, 1e-5, 1e-5, name + " dweight");
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < s; ++k) {
        const double xhat = (x[at(i, k)] - mu) * r;
        expectClose(bn.y[at(i, k)], xhat * w + b, 1e-5, 1e-5, name + " y");
        expectClose(bn.dx[at(i, k)], w * r * (dy[at(i, k)] - g / count - xhat * gx / count), 1e-4,
                    1e-5, name + " dx");
      }
  }
}

DTC_INSTANTIATE_POOL_TEST(ConvTest);

}  // namespace
}  // namespace dtc::cpu::testing
