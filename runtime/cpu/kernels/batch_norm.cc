// BatchNorm2d over x [N, C, S]: per-channel statistics, each channel one task.
#include <cmath>

#include "cpu/kernels/batch_norm_channel.h"
#include "cpu/kernels/conv_kernels.h"
#include "cpu/kernels/fast_math.h"

namespace dtc::cpu {
namespace {

// One channel's forward and backward, compiled per vector width (the lanes are doubles).
DTC_VECTOR_CLONES void trainChannel(const float* x, const float* weight, const float* bias,
                                    const float* runningMean, const float* runningVar, float* y,
                                    float* mean, float* rstd, float* newRunningMean,
                                    float* newRunningVar, bn::Channel t, float eps,
                                    float momentum) {
  const int64_t count = t.n * t.s, ch = t.ch;
  const double mu = bn::sum(x, t) / count;
  bn::normalize(x, t, mu, bn::centeredSquares(x, t, mu), count, weight[ch], bias[ch],
                runningMean[ch], runningVar[ch], eps, momentum, y, mean[ch], rstd[ch],
                newRunningMean[ch], newRunningVar[ch]);
}

DTC_VECTOR_CLONES void gradChannel(const float* dy, const float* x, const float* weight,
                                   const float* mean, const float* rstd, float* dx, float* dweight,
                                   float* dbias, bn::Channel t) {
  const double count = static_cast<double>(t.n * t.s);
  const int64_t ch = t.ch;
  double sumG, sumGX;
  bn::gradSums(dy, x, t, mean[ch], rstd[ch], sumG, sumGX);
  dbias[ch] = static_cast<float>(sumG);
  dweight[ch] = static_cast<float>(sumGX);
  bn::gradInput(dy, x, t, mean[ch], rstd[ch], weight[ch], sumG / count, sumGX / count, dx);
}

}  // namespace

void batchNormTrain(const float* x, const float* weight, const float* bias,
                    const float* runningMean, const float* runningVar, float* y, float* mean,
                    float* rstd, float* newRunningMean, float* newRunningVar, int64_t n, int64_t c,
                    int64_t s, float eps, float momentum, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      trainChannel(x, weight, bias, runningMean, runningVar, y, mean, rstd, newRunningMean,
                   newRunningVar, bn::Channel{n, c, s, ch}, eps, momentum);
  });
}

void batchNormTrainGrad(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, float* dx, float* dweight, float* dbias, int64_t n,
                        int64_t c, int64_t s, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      gradChannel(dy, x, weight, mean, rstd, dx, dweight, dbias, bn::Channel{n, c, s, ch});
  });
}

void batchNormEval(const float* x, const float* weight, const float* bias, const float* runningMean,
                   const float* runningVar, float* y, int64_t n, int64_t c, int64_t s, float eps,
                   ThreadPool& pool) {
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
