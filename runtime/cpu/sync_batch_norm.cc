// BatchNorm split at its per-channel sums, for a batch spread over devices (synchronised
// BatchNorm): the sums are partial on each device and all-reduced between the steps, so every
// device normalises with the statistics of the whole batch. Same arithmetic as batch_norm.cc
// (double accumulation, two passes for the variance).
#include <cmath>

#include "cpu/conv_kernels.h"

namespace dtc::cpu {

void batchNormSum(const float* x, float* sum, int64_t n, int64_t c, int64_t s, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      double total = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) total += x[(i * c + ch) * s + k];
      sum[ch] = static_cast<float>(total);
    }
  });
}

void batchNormCenteredSquares(const float* x, const float* sum, float* squares, int64_t n,
                              int64_t c, int64_t s, int64_t count, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      const double mu = double(sum[ch]) / double(count);
      double total = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
          const double d = x[(i * c + ch) * s + k] - mu;
          total += d * d;
        }
      squares[ch] = static_cast<float>(total);
    }
  });
}

void batchNormNormalize(const float* x, const float* sum, const float* squares,
                        const float* weight, const float* bias, const float* runningMean,
                        const float* runningVar, float* y, float* mean, float* rstd,
                        float* newRunningMean, float* newRunningVar, int64_t n, int64_t c,
                        int64_t s, int64_t count, float eps, float momentum, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      const double mu = double(sum[ch]) / double(count), sq = squares[ch];
      const double var = sq / double(count);
      const float r = static_cast<float>(1.0 / std::sqrt(var + eps));
      const float m = static_cast<float>(mu), w = weight[ch], b = bias[ch];
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
          const int64_t at = (i * c + ch) * s + k;
          y[at] = (x[at] - m) * r * w + b;
        }
      mean[ch] = m;
      rstd[ch] = r;
      const double unbiased = count > 1 ? sq / double(count - 1) : var;
      newRunningMean[ch] = static_cast<float>((1.0 - momentum) * runningMean[ch] + momentum * mu);
      newRunningVar[ch] = static_cast<float>((1.0 - momentum) * runningVar[ch] + momentum * unbiased);
    }
  });
}

void batchNormGradSums(const float* dy, const float* x, const float* mean, const float* rstd,
                       float* dbias, float* dweight, int64_t n, int64_t c, int64_t s,
                       ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      const float m = mean[ch], r = rstd[ch];
      double sumG = 0, sumGX = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
          const int64_t at = (i * c + ch) * s + k;
          sumG += dy[at];
          sumGX += double(dy[at]) * (x[at] - m) * r;
        }
      dbias[ch] = static_cast<float>(sumG);
      dweight[ch] = static_cast<float>(sumGX);
    }
  });
}

void batchNormGradInput(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, const float* dbias, const float* dweight, float* dx,
                        int64_t n, int64_t c, int64_t s, int64_t count, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      const float m = mean[ch], r = rstd[ch];
      // dx = w·rstd·(g − mean(g) − xhat·mean(g·xhat)), the means over the whole batch.
      const double scale = double(weight[ch]) * r, mg = dbias[ch] / double(count),
                   mgx = dweight[ch] / double(count);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
          const int64_t at = (i * c + ch) * s + k;
          const double xhat = (x[at] - m) * r;
          dx[at] = static_cast<float>(scale * (dy[at] - mg - xhat * mgx));
        }
    }
  });
}

}  // namespace dtc::cpu
