// BatchNorm2d over x [N, C, S] (cpu/kernels/batch_norm_channel.h's arithmetic, in the same types
// and order): one block per channel, per-channel sums in double with a fixed reduction tree, two
// passes for the variance. A channel's sums complete before any of its outputs is written, so
// y may alias x and dx may alias dy; the running statistics are read and written by one thread.
#include <algorithm>

#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

// Element e in [0, N·S) of channel ch.
__device__ inline int64_t at(const NormDims& d, int64_t ch, int64_t e) {
  return ((e / d.s) * d.c + ch) * d.s + e % d.s;
}

__device__ double channelSum(const float* x, const NormDims& d, int64_t ch) {
  double total = 0;
  for (int64_t e = threadIdx.x; e < d.n * d.s; e += blockDim.x) total += x[at(d, ch, e)];
  return blockSum(total);
}

__device__ double centeredSquares(const float* x, const NormDims& d, int64_t ch, double mu) {
  double total = 0;
  for (int64_t e = threadIdx.x; e < d.n * d.s; e += blockDim.x) {
    const double v = x[at(d, ch, e)] - mu;
    total += v * v;
  }
  return blockSum(total);
}

struct Stats {
  float *y, *mean, *rstd, *newRunningMean, *newRunningVar;
  const float *weight, *bias, *runningMean, *runningVar;
};

__device__ void normalize(const float* x, const NormDims& d, int64_t ch, double mu, double sq,
                          int64_t count, float eps, float momentum, const Stats& o) {
  const double var = sq / double(count);
  const float r = static_cast<float>(1.0 / sqrt(var + eps));
  const float m = static_cast<float>(mu);
  const float w = o.weight[ch], b = o.bias[ch];
  for (int64_t e = threadIdx.x; e < d.n * d.s; e += blockDim.x) {
    const int64_t i = at(d, ch, e);
    o.y[i] = (x[i] - m) * r * w + b;
  }
  if (threadIdx.x == 0) {
    o.mean[ch] = m;
    o.rstd[ch] = r;
    const double unbiased = count > 1 ? sq / double(count - 1) : var;
    o.newRunningMean[ch] = static_cast<float>((1.0 - momentum) * o.runningMean[ch] + momentum * mu);
    o.newRunningVar[ch] =
        static_cast<float>((1.0 - momentum) * o.runningVar[ch] + momentum * unbiased);
  }
}

// Σ dy and Σ dy·xhat over the channel (every thread gets both).
__device__ void gradSums(const float* dy, const float* x, const NormDims& d, int64_t ch, float m,
                         float r, double& sumG, double& sumGX) {
  sumG = 0, sumGX = 0;
  for (int64_t e = threadIdx.x; e < d.n * d.s; e += blockDim.x) {
    const int64_t i = at(d, ch, e);
    sumG += dy[i];
    sumGX += double(dy[i]) * (x[i] - m) * r;
  }
  sumG = blockSum(sumG);
  sumGX = blockSum(sumGX);
}

__device__ void gradInput(const float* dy, const float* x, const NormDims& d, int64_t ch, float m,
                          float r, float weight, double mg, double mgx, float* dx) {
  const double scale = double(weight) * r;
  for (int64_t e = threadIdx.x; e < d.n * d.s; e += blockDim.x) {
    const int64_t i = at(d, ch, e);
    const double xhat = (x[i] - m) * r;
    dx[i] = static_cast<float>(scale * (dy[i] - mg - xhat * mgx));
  }
}

__global__ void trainKernel(const float* x, NormDims d, float eps, float momentum, Stats o) {
  const int64_t count = d.n * d.s;
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
    const double mu = channelSum(x, d, ch) / count;
    normalize(x, d, ch, mu, centeredSquares(x, d, ch, mu), count, eps, momentum, o);
  }
}

__global__ void trainGradKernel(const float* dy, const float* x, const float* weight,
                                const float* mean, const float* rstd, float* dx, float* dweight,
                                float* dbias, NormDims d) {
  const double count = static_cast<double>(d.n * d.s);
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
    double sumG, sumGX;
    gradSums(dy, x, d, ch, mean[ch], rstd[ch], sumG, sumGX);
    if (threadIdx.x == 0) {
      dbias[ch] = static_cast<float>(sumG);
      dweight[ch] = static_cast<float>(sumGX);
    }
    gradInput(dy, x, d, ch, mean[ch], rstd[ch], weight[ch], sumG / count, sumGX / count, dx);
  }
}

__global__ void evalKernel(const float* x, const float* weight, const float* bias,
                           const float* runningMean, const float* runningVar, float* y, NormDims d,
                           float eps) {
  for (int64_t e = globalIndex(); e < d.n * d.c * d.s; e += globalStride()) {
    const int64_t ch = (e / d.s) % d.c;
    const float r = static_cast<float>(1.0 / sqrt(double(runningVar[ch]) + eps));
    y[e] = (x[e] - runningMean[ch]) * r * weight[ch] + bias[ch];
  }
}

__global__ void sumKernel(const float* x, float* sum, NormDims d) {
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
    const double s = channelSum(x, d, ch);
    if (threadIdx.x == 0) sum[ch] = static_cast<float>(s);
  }
}

__global__ void centeredSquaresKernel(const float* x, const float* sum, float* squares, NormDims d,
                                      int64_t count) {
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
    const double s = centeredSquares(x, d, ch, double(sum[ch]) / double(count));
    if (threadIdx.x == 0) squares[ch] = static_cast<float>(s);
  }
}

__global__ void normalizeKernel(const float* x, const float* sum, const float* squares, NormDims d,
                                int64_t count, float eps, float momentum, Stats o) {
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x)
    normalize(x, d, ch, double(sum[ch]) / double(count), squares[ch], count, eps, momentum, o);
}

__global__ void gradSumsKernel(const float* dy, const float* x, const float* mean,
                               const float* rstd, float* dbias, float* dweight, NormDims d) {
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x) {
    double sumG, sumGX;
    gradSums(dy, x, d, ch, mean[ch], rstd[ch], sumG, sumGX);
    if (threadIdx.x == 0) {
      dbias[ch] = static_cast<float>(sumG);
      dweight[ch] = static_cast<float>(sumGX);
    }
  }
}

__global__ void gradInputKernel(const float* dy, const float* x, const float* weight,
                                const float* mean, const float* rstd, const float* dbias,
                                const float* dweight, float* dx, NormDims d, int64_t count) {
  for (int64_t ch = blockIdx.x; ch < d.c; ch += gridDim.x)
    gradInput(dy, x, d, ch, mean[ch], rstd[ch], weight[ch], dbias[ch] / double(count),
              dweight[ch] / double(count), dx);
}

unsigned channelBlocks(const NormDims& d) {
  return static_cast<unsigned>(std::min<int64_t>(d.c, 65535));
}
int channelThreads(const NormDims& d) { return rowThreads(d.n * d.s); }

}  // namespace

#define DTC_CHANNELS(kernel, ...)                                                         \
  do {                                                                                    \
    if (d.c > 0) kernel<<<channelBlocks(d), channelThreads(d), 0, stream>>>(__VA_ARGS__); \
    return cudaGetLastError();                                                            \
  } while (0)

cudaError_t batchNormTrain(const float* x, const float* weight, const float* bias,
                           const float* runningMean, const float* runningVar, float* y, float* mean,
                           float* rstd, float* newRunningMean, float* newRunningVar, NormDims d,
                           float eps, float momentum, cudaStream_t stream) {
  const Stats o{y,      mean, rstd,        newRunningMean, newRunningVar,
                weight, bias, runningMean, runningVar};
  DTC_CHANNELS(trainKernel, x, d, eps, momentum, o);
}

cudaError_t batchNormTrainGrad(const float* dy, const float* x, const float* weight,
                               const float* mean, const float* rstd, float* dx, float* dweight,
                               float* dbias, NormDims d, cudaStream_t stream) {
  DTC_CHANNELS(trainGradKernel, dy, x, weight, mean, rstd, dx, dweight, dbias, d);
}

cudaError_t batchNormEval(const float* x, const float* weight, const float* bias,
                          const float* runningMean, const float* runningVar, float* y, NormDims d,
                          float eps, cudaStream_t stream) {
  const int64_t total = d.n * d.c * d.s;
  if (total > 0)
    evalKernel<<<blocksFor(total), kThreads, 0, stream>>>(x, weight, bias, runningMean, runningVar,
                                                          y, d, eps);
  return cudaGetLastError();
}

cudaError_t batchNormSum(const float* x, float* sum, NormDims d, cudaStream_t stream) {
  DTC_CHANNELS(sumKernel, x, sum, d);
}

cudaError_t batchNormCenteredSquares(const float* x, const float* sum, float* squares, NormDims d,
                                     int64_t count, cudaStream_t stream) {
  DTC_CHANNELS(centeredSquaresKernel, x, sum, squares, d, count);
}

cudaError_t batchNormNormalize(const float* x, const float* sum, const float* squares,
                               const float* weight, const float* bias, const float* runningMean,
                               const float* runningVar, float* y, float* mean, float* rstd,
                               float* newRunningMean, float* newRunningVar, NormDims d,
                               int64_t count, float eps, float momentum, cudaStream_t stream) {
  const Stats o{y,      mean, rstd,        newRunningMean, newRunningVar,
                weight, bias, runningMean, runningVar};
  DTC_CHANNELS(normalizeKernel, x, sum, squares, d, count, eps, momentum, o);
}

cudaError_t batchNormGradSums(const float* dy, const float* x, const float* mean, const float* rstd,
                              float* dbias, float* dweight, NormDims d, cudaStream_t stream) {
  DTC_CHANNELS(gradSumsKernel, dy, x, mean, rstd, dbias, dweight, d);
}

cudaError_t batchNormGradInput(const float* dy, const float* x, const float* weight,
                               const float* mean, const float* rstd, const float* dbias,
                               const float* dweight, float* dx, NormDims d, int64_t count,
                               cudaStream_t stream) {
  DTC_CHANNELS(gradInputKernel, dy, x, weight, mean, rstd, dbias, dweight, dx, d, count);
}

}  // namespace dtc::cuda::kernels
