// Softmax over rows and its gradient (cpu/kernels/attention.cc), plain and causal over attention
// scores [batch, T, T]: one block per row; in the causal form row i sees keys j <= i, masked
// entries are exactly 0. A row's reductions
// finish before any of it is written, so y may alias x (and dx may alias dy or y).
#include <algorithm>

#include "common.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

// Row r sees its first visible(r) entries: keys j <= i of row (b, i) (causal), or the whole row.
struct Causal {
  int64_t t;
  __device__ int64_t operator()(int64_t r) const { return r % t + 1; }
};
struct Whole {
  int64_t n;
  __device__ int64_t operator()(int64_t) const { return n; }
};

template <typename Visible>
__global__ void softmaxKernel(const float* x, float* y, int64_t rows, int64_t n, float scale,
                              Visible visible) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t seen = visible(r);
    const float* in = x + r * n;
    float* out = y + r * n;
    float maxv = -INFINITY;
    for (int64_t j = threadIdx.x; j < seen; j += blockDim.x) maxv = MaxOp{}(maxv, scale * in[j]);
    maxv = blockMax(maxv);
    double sum = 0;  // in double, as the CPU
    for (int64_t j = threadIdx.x; j < seen; j += blockDim.x) sum += expf(scale * in[j] - maxv);
    sum = blockSum(sum);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      out[j] = j < seen ? expf(scale * in[j] - maxv) * inv : 0.0f;
  }
}

template <typename Visible>
__global__ void softmaxGradKernel(const float* dy, const float* y, float* dx, int64_t rows,
                                  int64_t n, float scale, Visible visible) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t seen = visible(r);
    const float* g = dy + r * n;
    const float* p = y + r * n;
    float* out = dx + r * n;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < seen; j += blockDim.x)
      dot += static_cast<double>(g[j]) * p[j];
    const float d = static_cast<float>(blockSum(dot));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      out[j] = j < seen ? scale * p[j] * (g[j] - d) : 0.0f;
  }
}

__global__ void logSoftmaxKernel(const float* x, float* y, int64_t rows, int64_t n, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * n;
    float* out = y + r * n;
    float maxv = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) maxv = MaxOp{}(maxv, scale * in[j]);
    maxv = blockMax(maxv);
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(scale * in[j] - maxv);
    const float logSum = static_cast<float>(log(blockSum(sum)));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = (scale * in[j] - maxv) - logSum;
  }
}

__global__ void logSoftmaxGradKernel(const float* dy, const float* y, float* dx, int64_t rows,
                                     int64_t n, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* g = dy + r * n;
    const float* p = y + r * n;
    float* out = dx + r * n;
    double total = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) total += g[j];
    const float t = static_cast<float>(blockSum(total));
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = scale * (g[j] - expf(p[j]) * t);
  }
}

// One thread per element of out; each reads its row's two log-sum-exps (cpu::attentionMerge).
__global__ void attentionMergeKernel(Float type, const void* outA, const float* lseA,
                                     const void* outB, const float* lseB, void* out, float* lse,
                                     int64_t rows, int64_t d) {
  const int64_t n = rows * d;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / d;
    const float a = lseA[r], b = lseB[r], m = fmaxf(a, b);
    float value = 0.f, merged = m;
    if (m != -INFINITY) {
      const double wa = exp(static_cast<double>(a) - m), wb = exp(static_cast<double>(b) - m);
      value =
          static_cast<float>((wa * loadAs(type, outA, i) + wb * loadAs(type, outB, i)) / (wa + wb));
      merged = m + static_cast<float>(log(wa + wb));
    }
    storeAs(type, out, i, value);
    // Every thread of the row computes its lse alike; the row's first element writes it (the
    // outputs alias no input: threads of the row in other blocks may still read lseA).
    if (i % d == 0) lse[r] = merged;
  }
}

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

}  // namespace

cudaError_t causalSoftmax(const float* x, float* y, int64_t batch, int64_t t, float scale,
                          cudaStream_t stream) {
  if (batch * t > 0)
    softmaxKernel<<<rowBlocks(batch * t), rowThreads(t), 0, stream>>>(x, y, batch * t, t, scale,
                                                                      Causal{t});
  return cudaGetLastError();
}

cudaError_t causalSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t batch, int64_t t,
                              float scale, cudaStream_t stream) {
  if (batch * t > 0)
    softmaxGradKernel<<<rowBlocks(batch * t), rowThreads(t), 0, stream>>>(dy, y, dx, batch * t, t,
                                                                          scale, Causal{t});
  return cudaGetLastError();
}

cudaError_t softmax(const float* x, float* y, int64_t rows, int64_t n, float scale, bool log,
                    cudaStream_t stream) {
  if (rows * n > 0 && log)
    logSoftmaxKernel<<<rowBlocks(rows), rowThreads(n), 0, stream>>>(x, y, rows, n, scale);
  else if (rows * n > 0)
    softmaxKernel<<<rowBlocks(rows), rowThreads(n), 0, stream>>>(x, y, rows, n, scale, Whole{n});
  return cudaGetLastError();
}

cudaError_t softmaxGrad(const float* dy, const float* y, float* dx, int64_t rows, int64_t n,
                        float scale, bool log, cudaStream_t stream) {
  if (rows * n > 0 && log)
    logSoftmaxGradKernel<<<rowBlocks(rows), rowThreads(n), 0, stream>>>(dy, y, dx, rows, n, scale);
  else if (rows * n > 0)
    softmaxGradKernel<<<rowBlocks(rows), rowThreads(n), 0, stream>>>(dy, y, dx, rows, n, scale,
                                                                     Whole{n});
  return cudaGetLastError();
}

cudaError_t attentionMerge(Float type, const void* outA, const float* lseA, const void* outB,
                           const float* lseB, void* out, float* lse, int64_t rows, int64_t d,
                           cudaStream_t stream) {
  const int64_t n = rows * d;
  if (n > 0)
    attentionMergeKernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535)), 256, 0,
                           stream>>>(type, outA, lseA, outB, lseB, out, lse, rows, d);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
