// BatchNorm split at its per-channel sums, for a batch spread over devices (synchronised
// BatchNorm): the sums are partial on each device and all-reduced between the steps, so every
// device normalises with the statistics of the whole batch. The per-channel arithmetic is
// batch_norm.cc's (batch_norm_channel.h).
#include "cpu/kernels/batch_norm_channel.h"
#include "cpu/kernels/conv_kernels.h"

namespace dtc::cpu {

void batchNormSum(const float* x, float* sum, int64_t n, int64_t c, int64_t s, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      sum[ch] = static_cast<float>(bn::sum(x, {n, c, s, ch}));
  });
}

void batchNormCenteredSquares(const float* x, const float* sum, float* squares, int64_t n,
                              int64_t c, int64_t s, int64_t count, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      squares[ch] = static_cast<float>(
          bn::centeredSquares(x, {n, c, s, ch}, double(sum[ch]) / double(count)));
  });
}

void batchNormNormalize(const float* x, const float* sum, const float* squares, const float* weight,
                        const float* bias, const float* runningMean, const float* runningVar,
                        float* y, float* mean, float* rstd, float* newRunningMean,
                        float* newRunningVar, int64_t n, int64_t c, int64_t s, int64_t count,
                        float eps, float momentum, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      bn::normalize(x, {n, c, s, ch}, double(sum[ch]) / double(count), squares[ch], count,
                    weight[ch], bias[ch], runningMean[ch], runningVar[ch], eps, momentum, y,
                    mean[ch], rstd[ch], newRunningMean[ch], newRunningVar[ch]);
  });
}

void batchNormGradSums(const float* dy, const float* x, const float* mean, const float* rstd,
                       float* dbias, float* dweight, int64_t n, int64_t c, int64_t s,
                       ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch) {
      double sumG, sumGX;
      bn::gradSums(dy, x, {n, c, s, ch}, mean[ch], rstd[ch], sumG, sumGX);
      dbias[ch] = static_cast<float>(sumG);
      dweight[ch] = static_cast<float>(sumGX);
    }
  });
}

void batchNormGradInput(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, const float* dbias, const float* dweight, float* dx,
                        int64_t n, int64_t c, int64_t s, int64_t count, ThreadPool& pool) {
  pool.parallelFor(c, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ch = begin; ch < end; ++ch)
      bn::gradInput(dy, x, {n, c, s, ch}, mean[ch], rstd[ch], weight[ch], dbias[ch] / double(count),
                    dweight[ch] / double(count), dx);
  });
}

}  // namespace dtc::cpu
