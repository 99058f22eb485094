// layerNorm and layerNormGrad against a double-precision reference and central finite
// differences; the gradient's row reductions must not depend on the thread count.
#include <cmath>
#include <functional>
#include <string>

#include "cpu/kernels/transformer_kernels.h"
#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

constexpr double kEps = 1e-5;

struct Reference {
  std::vector<double> y, mean, rstd;  // [rows, C], [rows], [rows]
};

Reference referenceLayerNorm(const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& b, int64_t rows, int64_t c) {
  Reference ref{std::vector<double>(x.size()), std::vector<double>(rows),
                std::vector<double>(rows)};
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mu += x[r * c + j] / c;
    for (int64_t j = 0; j < c; ++j) var += (x[r * c + j] - mu) * (x[r * c + j] - mu) / c;
    const double s = 1.0 / std::sqrt(var + kEps);
    for (int64_t j = 0; j < c; ++j) ref.y[r * c + j] = (x[r * c + j] - mu) * s * w[j] + b[j];
    ref.mean[r] = mu;
    ref.rstd[r] = s;
  }
  return ref;
}

// L = Σ dy ⊙ layerNorm(x, w, b), whose gradients are what layerNormGrad returns.
double loss(const std::vector<double>& dy, const std::vector<double>& x,
            const std::vector<double>& w, const std::vector<double>& b, int64_t rows, int64_t c) {
  const auto y = referenceLayerNorm(x, w, b, rows, c).y;
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
  return l;
}

// Central differences of f() with respect to every entry of *v, one of f's inputs.
std::vector<double> finiteDifferences(std::vector<double>* v, const std::function<double()>& f) {
  const double h = 1e-4;
  std::vector<double> g(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const double saved = (*v)[i];
    (*v)[i] = saved + h;
    const double lp = f();
    (*v)[i] = saved - h;
    const double lm = f();
    (*v)[i] = saved;
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

std::vector<double> toDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct Data {
  std::vector<float> x, w, b, dy;
};

Data makeData(int64_t rows, int64_t c, uint32_t seed, float offset = 0.0f) {
  Data d{randomFloats(rows * c, seed, offset - 3.0f, offset + 3.0f), randomFloats(c, seed + 1),
         randomFloats(c, seed + 2), randomFloats(rows * c, seed + 3)};
  return d;
}

class LayerNormTest : public PoolTest {};

TEST_P(LayerNormTest, ForwardMatchesReference) {
  struct Case {
    int64_t rows, c;
    float offset;
  };
  // Odd sizes; the last case has |mean| ≫ std, where one-pass fp32 variance would fail.
  const Case cases[] = {{1, 1, 0},    {1, 7, 0},    {7, 33, 0},       {200, 33, 0},
                        {65, 257, 0}, {1000, 5, 0}, {31, 64, 1000.0f}};
  uint32_t seed = 400;
  for (const auto& cs : cases) {
    const std::string what = "rows " + std::to_string(cs.rows) + " c " + std::to_string(cs.c);
    const Data d = makeData(cs.rows, cs.c, seed += 10, cs.offset);
    std::vector<float> y(d.x.size()), mean(cs.rows), rstd(cs.rows);
    layerNorm(d.x.data(), d.w.data(), d.b.data(), y.data(), mean.data(), rstd.data(), cs.rows, cs.c,
              static_cast<float>(kEps), pool_);
    const auto ref = referenceLayerNorm(toDouble(d.x), toDouble(d.w), toDouble(d.b), cs.rows, cs.c);
    // With the offset, the kernel's fp32 mean is rounded by up to 1000·2^-24, which is
    // ~2e-5 of the std (~1.7) and shows up as that relative error in x − mean.
    const double tol = cs.offset != 0 ? 1e-4 : 1e-5;
    expectClose(y, ref.y, tol, tol, what + " y");
    expectClose(mean, ref.mean, 1e-6, 1e-6, what + " mean");
    expectClose(rstd, ref.rstd, tol, 1e-6, what + " rstd");
  }
}

TEST_P(LayerNormTest, GradMatchesReferenceAndFiniteDifferences) {
  struct Case {
    int64_t rows, c;
  };
  const Case cases[] = {{4, 1}, {1, 7}, {5, 7}, {3, 16}, {37, 33}, {70, 9}};
  uint32_t seed = 500;
  for (const auto& cs : cases) {
    const std::string what = "rows " + std::to_string(cs.rows) + " c " + std::to_string(cs.c);
    const int64_t rows = cs.rows, c = cs.c;
    const Data d = makeData(rows, c, seed += 10);
    std::vector<float> y(d.x.size()), mean(rows), rstd(rows);
    layerNorm(d.x.data(), d.w.data(), d.b.data(), y.data(), mean.data(), rstd.data(), rows, c,
              static_cast<float>(kEps), pool_);
    std::vector<float> dx(d.x.size(), -7.0f), dw(c, -7.0f), db(c, -7.0f);
    layerNormGrad(d.dy.data(), d.x.data(), d.w.data(), mean.data(), rstd.data(), dx.data(),
                  dw.data(), db.data(), rows, c, pool_);

    std::vector<double> x = toDouble(d.x), w = toDouble(d.w), b = toDouble(d.b),
                        dy = toDouble(d.dy);
    // Analytic double reference.
    const auto ref = referenceLayerNorm(x, w, b, rows, c);
    std::vector<double> wantDx(x.size()), wantDw(c, 0.0), wantDb(c, 0.0), dwScale(c, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double meanG = 0, meanGX = 0;
      for (int64_t j = 0; j < c; ++j) {
        const double xhat = (x[r * c + j] - ref.mean[r]) * ref.rstd[r];
        meanG += dy[r * c + j] * w[j] / c;
        meanGX += dy[r * c + j] * w[j] * xhat / c;
        wantDw[j] += dy[r * c + j] * xhat;
        wantDb[j] += dy[r * c + j];
        dwScale[j] += std::abs(dy[r * c + j] * xhat);
      }
      for (int64_t j = 0; j < c; ++j) {
        const double xhat = (x[r * c + j] - ref.mean[r]) * ref.rstd[r];
        wantDx[r * c + j] = ref.rstd[r] * (dy[r * c + j] * w[j] - meanG - xhat * meanGX);
      }
    }
    expectClose(dx, wantDx, 1e-4, 1e-5, what + " dx");
    expectClose(dw, wantDw, 1e-5, 1e-6, what + " dw", &dwScale);
    expectClose(db, wantDb, 1e-5, 1e-5, what + " db");

    // Central finite differences of L = Σ dy ⊙ y with respect to x, w and b.
    auto f = [&] { return loss(dy, x, w, b, rows, c); };
    expectClose(dx, finiteDifferences(&x, f), 1e-3, 1e-4, what + " dx finite differences");
    expectClose(dw, finiteDifferences(&w, f), 1e-3, 1e-4, what + " dw finite differences");
    expectClose(db, finiteDifferences(&b, f), 1e-3, 1e-4, what + " db finite differences");
  }
}

TEST_P(LayerNormTest, GradIsBitIdenticalForAnyThreadCount) {
  // Row counts giving one partial chunk, several, and the capped chunk count (rows per chunk
  // grows past the minimum), none a multiple of the chunk size.
  struct Case {
    int64_t rows, c;
  };
  const Case cases[] = {{20, 33}, {1000, 65}, {20011, 7}};
  uint32_t seed = 600;
  for (const auto& cs : cases) {
    const std::string what = "rows " + std::to_string(cs.rows) + " c " + std::to_string(cs.c);
    const int64_t rows = cs.rows, c = cs.c;
    const Data d = makeData(rows, c, seed += 10);
    std::vector<float> y(d.x.size()), mean(rows), rstd(rows);
    layerNorm(d.x.data(), d.w.data(), d.b.data(), y.data(), mean.data(), rstd.data(), rows, c,
              static_cast<float>(kEps), pool_);
    std::vector<float> dx(d.x.size()), dw(c), db(c);
    layerNormGrad(d.dy.data(), d.x.data(), d.w.data(), mean.data(), rstd.data(), dx.data(),
                  dw.data(), db.data(), rows, c, pool_);
    for (int threads : {1, 2, 3, 4}) {
      ThreadPool other(threads);
      std::vector<float> y2(d.x.size()), mean2(rows), rstd2(rows);
      layerNorm(d.x.data(), d.w.data(), d.b.data(), y2.data(), mean2.data(), rstd2.data(), rows, c,
                static_cast<float>(kEps), other);
      EXPECT_EQ(y2, y) << what << " threads " << threads;
      std::vector<float> dx2(d.x.size()), dw2(c), db2(c);
      layerNormGrad(d.dy.data(), d.x.data(), d.w.data(), mean.data(), rstd.data(), dx2.data(),
                    dw2.data(), db2.data(), rows, c, other);
      EXPECT_EQ(dx2, dx) << what << " threads " << threads;
      EXPECT_EQ(dw2, dw) << what << " threads " << threads;
      EXPECT_EQ(db2, db) << what << " threads " << threads;
    }
  }
}

DTC_INSTANTIATE_POOL_TEST(LayerNormTest);

}  // namespace
}  // namespace dtc::cpu
