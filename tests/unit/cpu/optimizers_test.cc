#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace dtc::cpu {
namespace {

using testing::expectClose;
using testing::PoolTest;
using testing::randomFloats;

std::vector<double> toDouble(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// torch.optim.SGD (_single_tensor_sgd, dampening 0, not nesterov), written out in double.
struct RefSgd {
  std::vector<double> param, buf;
  bool hasBuf = false;
  void step(const std::vector<float>& grad, double lr, double momentum, double wd) {
    for (size_t i = 0; i < param.size(); ++i) {
      double g = grad[i];
      if (wd != 0) g += wd * param[i];
      if (momentum != 0) {
        buf[i] = hasBuf ? momentum * buf[i] + g : g;  // torch clones g on the first step
        g = buf[i];
      }
      param[i] -= lr * g;
    }
    hasBuf = true;
  }
};

// torch.optim.AdamW (_single_tensor_adam with decoupled weight decay), written out in double.
struct RefAdamW {
  std::vector<double> param, m, v;
  // The same average over |g|: m cancels between steps, so its fp32 error scales with this.
  std::vector<double> mScale = std::vector<double>(param.size(), 0.0);
  void step(const std::vector<float>& grad, int step, double lr, double b1, double b2, double eps,
            double wd) {
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    for (size_t i = 0; i < param.size(); ++i) {
      param[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * grad[i];
      mScale[i] = b1 * mScale[i] + (1 - b1) * std::abs(grad[i]);
      v[i] = b2 * v[i] + (1 - b2) * grad[i] * grad[i];
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
      param[i] -= (lr / bc1) * m[i] / denom;
    }
  }
};

class OptimizerTest : public PoolTest {};

const int64_t kSizes[] = {1, 1000, 40001};

TEST_P(OptimizerTest, SgdMultiStepMatchesTorchFormulas) {
  struct Config {
    float lr, momentum, wd;
  };
  for (const Config cfg : {Config{0.1f, 0.0f, 0.0f}, Config{0.05f, 0.9f, 0.01f},
                           Config{0.01f, 0.5f, 0.0f}, Config{0.1f, 0.0f, 0.1f}}) {
    for (int64_t n : kSizes) {
      auto param = randomFloats(n, 1 + n);
      std::vector<float> buf(n, 0.0f), newParam(n), newBuf(n, -7.0f);
      RefSgd ref{toDouble(param), std::vector<double>(n, 0.0)};
      const std::string what = "sgd lr=" + std::to_string(cfg.lr) +
                               " momentum=" + std::to_string(cfg.momentum) +
                               " wd=" + std::to_string(cfg.wd) + " n=" + std::to_string(n);
      for (int step = 1; step <= 6; ++step) {
        const auto grad = randomFloats(n, 100 * step + n);
        sgd(param.data(), grad.data(), buf.data(), newParam.data(), newBuf.data(), n, cfg.lr,
            cfg.momentum, cfg.wd, pool_);
        ref.step(grad, cfg.lr, cfg.momentum, cfg.wd);
        if (cfg.momentum == 0) {  // the buffer output is left untouched
          for (float b : newBuf) ASSERT_EQ(b, -7.0f) << what;
        } else {
          buf = newBuf;
        }
        param = newParam;
        expectClose(param, ref.param, 1e-5, 1e-6, what + " step " + std::to_string(step));
        if (cfg.momentum != 0)
          expectClose(buf, ref.buf, 1e-5, 1e-6, what + " buf step " + std::to_string(step));
      }
    }
  }
}

TEST_P(OptimizerTest, SgdInPlaceMatchesOutOfPlace) {
  const int64_t n = 40001;
  const auto param = randomFloats(n, 5), grad = randomFloats(n, 6), buf = randomFloats(n, 7);
  std::vector<float> newParam(n), newBuf(n);
  sgd(param.data(), grad.data(), buf.data(), newParam.data(), newBuf.data(), n, 0.1f, 0.9f, 0.01f,
      pool_);
  auto p = param, b = buf;
  sgd(p.data(), grad.data(), b.data(), p.data(), b.data(), n, 0.1f, 0.9f, 0.01f, pool_);
  EXPECT_EQ(p, newParam);
  EXPECT_EQ(b, newBuf);
}

TEST_P(OptimizerTest, AdamWMultiStepMatchesTorchFormulas) {
  struct Config {
    float lr, beta1, beta2, eps, wd;
  };
  for (const Config cfg :
       {Config{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f}, Config{1e-2f, 0.8f, 0.99f, 1e-6f, 0.0f},
        Config{3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f}}) {
    for (int64_t n : kSizes) {
      auto param = randomFloats(n, 11 + n);
      std::vector<float> m(n, 0.0f), v(n, 0.0f);
      // Torch computes the scalars from Python floats; feed the reference the same float
      // values this kernel receives so only the arithmetic is compared.
      RefAdamW ref{toDouble(param), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
      const std::string what = "adamw lr=" + std::to_string(cfg.lr) +
                               " wd=" + std::to_string(cfg.wd) + " n=" + std::to_string(n);
      for (int step = 1; step <= 10; ++step) {
        // Gradients of mixed magnitude, including tiny ones where eps matters.
        auto grad = randomFloats(n, 1000 * step + n);
        for (int64_t i = 0; i < n; i += 7) grad[i] *= 1e-6f;
        // Separate output buffers on odd steps, aliased ones on even steps.
        if (step % 2) {
          std::vector<float> p2(n), m2(n), v2(n);
          adamw(param.data(), grad.data(), m.data(), v.data(), p2.data(), m2.data(), v2.data(), n,
                static_cast<float>(step), cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.wd, pool_);
          param = p2, m = m2, v = v2;
        } else {
          adamw(param.data(), grad.data(), m.data(), v.data(), param.data(), m.data(), v.data(), n,
                static_cast<float>(step), cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.wd, pool_);
        }
        ref.step(grad, step, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.wd);
        const std::string at = what + " step " + std::to_string(step);
        expectClose(m, ref.m, 1e-5, 1e-12, at + " m", &ref.mScale);
        expectClose(v, ref.v, 1e-5, 1e-18, at + " v");
        expectClose(param, ref.param, 1e-5, 1e-7, at + " param");
      }
    }
  }
}

TEST_P(OptimizerTest, AdamWInPlaceMatchesOutOfPlace) {
  const int64_t n = 40001;
  const auto param = randomFloats(n, 21), grad = randomFloats(n, 22);
  const auto m = randomFloats(n, 23);
  auto v = randomFloats(n, 24);
  for (float& x : v) x = x * x;  // second moments are non-negative
  std::vector<float> p2(n), m2(n), v2(n);
  adamw(param.data(), grad.data(), m.data(), v.data(), p2.data(), m2.data(), v2.data(), n, 3.0f,
        1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, pool_);
  auto p = param, mm = m, vv = v;
  adamw(p.data(), grad.data(), mm.data(), vv.data(), p.data(), mm.data(), vv.data(), n, 3.0f, 1e-3f,
        0.9f, 0.999f, 1e-8f, 0.01f, pool_);
  EXPECT_EQ(p, p2);
  EXPECT_EQ(mm, m2);
  EXPECT_EQ(vv, v2);
}

DTC_INSTANTIATE_POOL_TEST(OptimizerTest);

}  // namespace
}  // namespace dtc::cpu
