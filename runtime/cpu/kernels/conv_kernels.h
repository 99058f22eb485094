// CPU kernels for convolutional networks (NCHW, fp32): conv2d through im2col + GEMM,
// max-pooling and batch normalisation, forward and backward.
#pragma once

#include <cstdint>

#include "cpu/kernels/kernels.h"

namespace dtc::cpu {

struct ConvGeometry {
  int64_t n, c, h, w;      // input [N, C, H, W]
  int64_t o, kh, kw;       // weight [O, C, kh, kw]
  int64_t sh, sw, ph, pw;  // stride, zero padding
  int64_t oh() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t ow() const { return (w + 2 * pw - kw) / sw + 1; }
};

// y [N, O, oh, ow] = conv(x, weight) (no bias).
void conv2d(const float* x, const float* weight, float* y, const ConvGeometry& g, ThreadPool& pool);
// dx [N, C, H, W] from dy [N, O, oh, ow].
void conv2dGradInput(const float* dy, const float* weight, float* dx, const ConvGeometry& g,
                     ThreadPool& pool);
// dweight [O, C, kh, kw] from dy and x; summed over the batch in a fixed order (deterministic).
void conv2dGradWeight(const float* dy, const float* x, float* dweight, const ConvGeometry& g,
                      ThreadPool& pool);

struct PoolGeometry {
  int64_t n, c, h, w, kh, kw, sh, sw;
  int64_t oh() const { return (h - kh) / sh + 1; }
  int64_t ow() const { return (w - kw) / sw + 1; }
};

// y [N, C, oh, ow] = max over each window; the first maximum wins ties (as PyTorch).
void maxPool2d(const float* x, float* y, const PoolGeometry& g, ThreadPool& pool);
// dx [N, C, H, W]: each dy goes to its window's first maximum in x.
void maxPool2dGrad(const float* dy, const float* x, float* dx, const PoolGeometry& g,
                   ThreadPool& pool);

// BatchNorm2d, training mode, x [N, C, S] (S = H·W): per-channel batch mean and biased
// variance normalise x; mean/rstd [C] are saved for the backward pass; the running statistics
// become (1 − momentum)·running + momentum·batch (unbiased variance). newRunning* may alias
// running*.
void batchNormTrain(const float* x, const float* weight, const float* bias,
                    const float* runningMean, const float* runningVar, float* y, float* mean,
                    float* rstd, float* newRunningMean, float* newRunningVar, int64_t n, int64_t c,
                    int64_t s, float eps, float momentum, ThreadPool& pool);
void batchNormTrainGrad(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, float* dx, float* dweight, float* dbias, int64_t n,
                        int64_t c, int64_t s, ThreadPool& pool);
// Evaluation mode: normalise with the running statistics.
void batchNormEval(const float* x, const float* weight, const float* bias, const float* runningMean,
                   const float* runningVar, float* y, int64_t n, int64_t c, int64_t s, float eps,
                   ThreadPool& pool);

// Synchronised BatchNorm (sync_batch_norm.cc): batchNormTrain and batchNormTrainGrad cut at
// their per-channel sums, which a partitioned plan all-reduces in between. `count` is the
// number of values per channel in the whole batch (N·S over every device).
// sum[c] = Σ x over N, S.
void batchNormSum(const float* x, float* sum, int64_t n, int64_t c, int64_t s, ThreadPool& pool);
// squares[c] = Σ (x − sum/count)².
void batchNormCenteredSquares(const float* x, const float* sum, float* squares, int64_t n,
                              int64_t c, int64_t s, int64_t count, ThreadPool& pool);
// batchNormTrain's results from the whole batch's sums.
void batchNormNormalize(const float* x, const float* sum, const float* squares, const float* weight,
                        const float* bias, const float* runningMean, const float* runningVar,
                        float* y, float* mean, float* rstd, float* newRunningMean,
                        float* newRunningVar, int64_t n, int64_t c, int64_t s, int64_t count,
                        float eps, float momentum, ThreadPool& pool);
// dbias[c] = Σ dy, dweight[c] = Σ dy·xhat (the parameter gradients; partial per device).
void batchNormGradSums(const float* dy, const float* x, const float* mean, const float* rstd,
                       float* dbias, float* dweight, int64_t n, int64_t c, int64_t s,
                       ThreadPool& pool);
// dx from the whole batch's dbias and dweight.
void batchNormGradInput(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, const float* dbias, const float* dweight, float* dx,
                        int64_t n, int64_t c, int64_t s, int64_t count, ThreadPool& pool);

}  // namespace dtc::cpu
