// Causal softmax over attention scores [batch, T, T] and its gradient (cpu/kernels/attention.cc):
// one block per row; row i sees keys j <= i, masked entries are exactly 0. A row's reductions
// finish before any of it is written, so y may alias x (and dx may alias dy or y).
#include <algorithm>

#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

__global__ void causalSoftmaxKernel(const float* x, float* y, int64_t rows, int64_t t,
                                    float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % t;  // query position: keys 0..i are visible
    const float* in = x + r * t;
    float* out = y + r * t;
    float maxv = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) maxv = MaxOp{}(maxv, scale * in[j]);
    maxv = blockMax(maxv);
    double sum = 0;  // in double, as the CPU
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum += expf(scale * in[j] - maxv);
    sum = blockSum(sum);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = threadIdx.x; j < t; j += blockDim.x)
      out[j] = j <= i ? expf(scale * in[j] - maxv) * inv : 0.0f;
  }
}

__global__ void causalSoftmaxGradKernel(const float* dy, const float* y, float* dx, int64_t rows,
                                        int64_t t, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % t;
    const float* g = dy + r * t;
    const float* p = y + r * t;
    float* out = dx + r * t;
    double dot = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) dot += static_cast<double>(g[j]) * p[j];
    const float d = static_cast<float>(blockSum(dot));
    for (int64_t j = threadIdx.x; j < t; j += blockDim.x)
      out[j] = j <= i ? scale * p[j] * (g[j] - d) : 0.0f;
  }
}

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

}  // namespace

cudaError_t causalSoftmax(const float* x, float* y, int64_t batch, int64_t t, float scale,
                          cudaStream_t stream) {
  if (batch * t > 0)
    causalSoftmaxKernel<<<rowBlocks(batch * t), rowThreads(t), 0, stream>>>(x, y, batch * t, t,
                                                                            scale);
  return cudaGetLastError();
}

cudaError_t causalSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t batch, int64_t t,
                              float scale, cudaStream_t stream) {
  if (batch * t > 0)
    causalSoftmaxGradKernel<<<rowBlocks(batch * t), rowThreads(t), 0, stream>>>(
        dy, y, dx, batch * t, t, scale);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
