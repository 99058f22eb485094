// BatchNorm2d over x [N, C, S]: per-channel statistics, each channel one task.
#include <cmath>

#include "cpu/conv_kernels.h"

namespace dtc::cpu {

void batchNormTrain(const float* x, const float* weight, const float* bias,
                    const float* runningMean, const float* runningVar, float* y, float* mean,
                    float* rstd, float* newRunningMean, float* newRunningVar, int64_t n, int64_t c,
                    int64_t s, float eps, float momentum, ThreadPool& pool) {
  const int64_t count = n * s;
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) sum += x[(i * c + ch) * s + k];
      const double mu = sum / count;
      double sq = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
          const double d = x[(i * c + ch) * s + k] - mu;
          sq += d * d;
        }
      const double var = sq / count;
      const float r = static_cast<float>(1.0 / std::sqrt(var + eps));
      const float m = static_cast<float>(mu), w = weight[ch], b = bias[ch];
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
          const int64_t at = (i * c + ch) * s + k;
          y[at] = (x[at] - m) * r * w + b;
        }
      mean[ch] = m;
      rstd[ch] = r;
      const double unbiased = count > 1 ? sq / (count - 1) : var;
      newRunningMean[ch] = static_cast<float>((1.0 - momentum) * runningMean[ch] + momentum * mu);
      newRunningVar[ch] = static_cast<float>((1.0 - momentum) * runningVar[ch] + momentum * unbiased);
    }
  });
}

void batchNormTrainGrad(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, float* dx, float* dweight, float* dbias, int64_t n,
                        int64_t c, int64_t s, ThreadPool& pool) {
  const double count = static_cast<double>(n * s);
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
      // dx = w·rstd·(g − mean(g) − xhat·mean(g·xhat))
      const double scale = double(weight[ch]) * r, mg = sumG / count, mgx = sumGX / count;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
          const int64_t at = (i * c + ch) * s + k;
          const double xhat = (x[at] - m) * r;
          dx[at] = static_cast<float>(scale * (dy[at] - mg - xhat * mgx));
        }
    }
  });
}

void batchNormEval(const float* x, const float* weight, const float* bias,
                   const float* runningMean, const float* runningVar, float* y, int64_t n,
                   int64_t c, int64_t s, float eps, ThreadPool& pool) {
  pool.parallelFor(n * c, 4, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t ch = plane % c;
      const float r = static_cast<float>(1.0 / std::sqrt(double(runningVar[ch]) + eps));
      const float m = runningMean[ch], w = weight[ch], b = bias[ch];
      for (int64_t k = 0; k < s; ++k) y[plane * s + k] = (x[plane * s + k] - m) * r * w + b;
    }
  });
}

}  // namespace dtc::cpu
