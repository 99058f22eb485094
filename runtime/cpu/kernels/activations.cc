// Element-wise activations and their analytic gradients. Every kernel reads element i before
// writing it, so outputs may alias inputs.
#include <cmath>

#include "cpu/kernels/fast_math.h"
#include "cpu/kernels/kernels.h"

namespace dtc::cpu {
namespace {

constexpr int64_t kGrain = 16384;
// Transcendental kernels cost ~10-20x a plain add per element, so they split earlier.
constexpr int64_t kGrainTranscendental = 2048;

constexpr float kSqrtHalf = 0.70710678118654752440f;     // 1/√2
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;   // 1/√(2π)
constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // √(2/π)
constexpr float kGeluCoeff = 0.044715f;

template <typename Fn>
void forEach(int64_t n, int64_t grain, ThreadPool& pool, Fn fn) {
  pool.parallelFor(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

// The GELU's loops over a chunk, vectorised (fast_math.h) for each vector width.

// 0.5·x·(1 + erf(x/√2))
DTC_VECTOR_CLONES void geluErfChunk(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + fastErf(v * kSqrtHalf));
  }
}

// d/dx = Φ(x) + x·φ(x), with Φ the normal CDF and φ its density.
DTC_VECTOR_CLONES void geluErfGradChunk(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float cdf = 0.5f * (1.0f + fastErf(v * kSqrtHalf));
    const float pdf = kInvSqrt2Pi * fastExp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

// The tanh form: 0.5·x·(1 + tanh(u)) with u = √(2/π)(x + 0.044715x³) is x·σ(2u) (σ the
// logistic function), one exp and no cancellation where tanh(u) nears −1.
DTC_VECTOR_CLONES void geluTanhChunk(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    y[i] = v / (1.0f + fastExp(-2.0f * u));
  }
}

// d/dx = 0.5(1 + t) + 0.5·x·(1 − t²)·du/dx with t = tanh(u) = 2s − 1, s = σ(2u):
// s + 2·x·s(1 − s)·du/dx.
DTC_VECTOR_CLONES void geluTanhGradChunk(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    const float s = 1.0f / (1.0f + fastExp(-2.0f * u));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
  }
}

DTC_VECTOR_CLONES void tanhChunk(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fastTanh(x[i]);
}

}  // namespace

void relu(const float* x, float* y, int64_t n, ThreadPool& pool) {
  // Written as x < 0 ? 0 : x so NaN propagates, as in torch.relu.
  forEach(n, kGrain, pool, [=](int64_t i) { y[i] = x[i] < 0.0f ? 0.0f : x[i]; });
}

void reluGrad(const float* dy, const float* x, float* dx, int64_t n, ThreadPool& pool) {
  // torch's threshold_backward: the gradient at exactly 0 is 0. dy is read whatever the sign,
  // so the select vectorises (a load under a condition does not).
  forEach(n, kGrain, pool, [=](int64_t i) {
    const float g = dy[i];
    dx[i] = x[i] > 0.0f ? g : 0.0f;
  });
}

void scale(const float* x, float* y, int64_t n, float factor, ThreadPool& pool) {
  forEach(n, kGrain, pool, [=](int64_t i) { y[i] = factor * x[i]; });
}

void power(const float* x, float* y, int64_t n, float exponent, ThreadPool& pool) {
  forEach(n, kGrainTranscendental, pool, [=](int64_t i) { y[i] = std::pow(x[i], exponent); });
}

void tanhForward(const float* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallelFor(n, kGrainTranscendental, [&](int64_t begin, int64_t end) {
    tanhChunk(x + begin, y + begin, end - begin);
  });
}

void tanhGrad(const float* dy, const float* y, float* dx, int64_t n, ThreadPool& pool) {
  // From the output: d tanh(x)/dx = 1 − y².
  forEach(n, kGrain, pool, [=](int64_t i) { dx[i] = dy[i] * (1.0f - y[i] * y[i]); });
}

void gelu(const float* x, float* y, int64_t n, bool approximateTanh, ThreadPool& pool) {
  if (approximateTanh) {
    pool.parallelFor(n, kGrain, [=](int64_t begin, int64_t end) {
      geluTanhChunk(x + begin, y + begin, end - begin);
    });
  } else {
    pool.parallelFor(n, kGrain, [=](int64_t begin, int64_t end) {
      geluErfChunk(x + begin, y + begin, end - begin);
    });
  }
}

void geluGrad(const float* dy, const float* x, float* dx, int64_t n, bool approximateTanh,
              ThreadPool& pool) {
  if (approximateTanh) {
    pool.parallelFor(n, kGrain, [=](int64_t begin, int64_t end) {
      geluTanhGradChunk(dy + begin, x + begin, dx + begin, end - begin);
    });
  } else {
    pool.parallelFor(n, kGrain, [=](int64_t begin, int64_t end) {
      geluErfGradChunk(dy + begin, x + begin, dx + begin, end - begin);
    });
  }
}

}  // namespace dtc::cpu
