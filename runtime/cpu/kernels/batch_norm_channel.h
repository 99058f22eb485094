// One channel's share of BatchNorm2d over x [N, C, S], shared by the fused kernels
// (batch_norm.cc) and the ones cut at the per-channel sums for a split batch
// (sync_batch_norm.cc), so both compute with the same arithmetic: double accumulation, two
// passes for the variance. Sums run in eight interleaved lanes, added in a fixed order at the
// end: the loops vectorise without reassociating anything, and a channel's result depends only
// on its values, not on threads.
#pragma once

#include <cmath>
#include <cstdint>

namespace dtc::cpu::bn {

struct Channel {
  int64_t n, c, s, ch;
  int64_t at(int64_t i, int64_t k) const { return (i * c + ch) * s + k; }
};

// Σ term(at) over the channel's values, term taking a value's offset.
template <typename Term>
inline double channelSum(Channel t, Term term) {
  constexpr int kLanes = 8;
  double lane[kLanes] = {};
  for (int64_t i = 0; i < t.n; ++i) {
    const int64_t row = t.at(i, 0);
    int64_t k = 0;
    for (; k + kLanes <= t.s; k += kLanes)
      for (int l = 0; l < kLanes; ++l) lane[l] += term(row + k + l);
    for (; k < t.s; ++k) lane[k % kLanes] += term(row + k);
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

inline double sum(const float* x, Channel t) {
  return channelSum(t, [&](int64_t at) { return double(x[at]); });
}

inline double centeredSquares(const float* x, Channel t, double mu) {
  return channelSum(t, [&](int64_t at) {
    const double d = x[at] - mu;
    return d * d;
  });
}

// y, mean and rstd of the channel from the batch mean `mu` and Σ(x − mu)² `sq` over `count`
// values, and the running statistics (unbiased variance, as PyTorch).
inline void normalize(const float* x, Channel t, double mu, double sq, int64_t count, float weight,
                      float bias, float runningMean, float runningVar, float eps, float momentum,
                      float* y, float& mean, float& rstd, float& newRunningMean,
                      float& newRunningVar) {
  const double var = sq / double(count);
  const float r = static_cast<float>(1.0 / std::sqrt(var + eps));
  const float m = static_cast<float>(mu);
  for (int64_t i = 0; i < t.n; ++i)
    for (int64_t k = 0; k < t.s; ++k) y[t.at(i, k)] = (x[t.at(i, k)] - m) * r * weight + bias;
  mean = m;
  rstd = r;
  const double unbiased = count > 1 ? sq / double(count - 1) : var;
  newRunningMean = static_cast<float>((1.0 - momentum) * runningMean + momentum * mu);
  newRunningVar = static_cast<float>((1.0 - momentum) * runningVar + momentum * unbiased);
}

// Σ dy and Σ dy·xhat over the channel (the bias and weight gradients).
inline void gradSums(const float* dy, const float* x, Channel t, float m, float r, double& sumG,
                     double& sumGX) {
  sumG = channelSum(t, [&](int64_t at) { return double(dy[at]); });
  sumGX = channelSum(t, [&](int64_t at) { return double(dy[at]) * (x[at] - m) * r; });
}

// dx = w·rstd·(g − mean(g) − xhat·mean(g·xhat)), with the batch means `mg` and `mgx`.
inline void gradInput(const float* dy, const float* x, Channel t, float m, float r, float weight,
                      double mg, double mgx, float* dx) {
  const double scale = double(weight) * r;
  for (int64_t i = 0; i < t.n; ++i)
    for (int64_t k = 0; k < t.s; ++k) {
      const int64_t at = t.at(i, k);
      const double xhat = (x[at] - m) * r;
      dx[at] = static_cast<float>(scale * (dy[at] - mg - xhat * mgx));
    }
}

}  // namespace dtc::cpu::bn
