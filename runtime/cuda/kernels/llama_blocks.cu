// RMSNorm and SwiGLU's gate, fused, and their gradients (cpu/kernels/llama_blocks.cc): row sums
// in double, one block per row; the weight's gradient as column sums over row chunks fixed by the
// shape (LayerNorm's chunks and scratch), added in chunk order: deterministic, no atomics.
#include <algorithm>

#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

__global__ void rmsNormKernel(const float* x, const float* w, float* y, float* rstd, int64_t rows,
                              int64_t c, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * c;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sq += static_cast<double>(in[j]) * in[j];
    sq = blockSum(sq);
    const float s = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(c) + eps));
    float* out = y + r * c;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) out[j] = in[j] * s * w[j];
    if (threadIdx.x == 0) rstd[r] = s;
  }
}

// partial [chunks, C]: Σ dy·x·rstd over the chunk's rows, per column.
__global__ void rmsNormWeightPartials(const float* dy, const float* x, const float* rstd,
                                      int64_t rows, int64_t c, int64_t chunks, int64_t chunkRows,
                                      double* partial) {
  for (int64_t i = globalIndex(); i < chunks * c; i += globalStride()) {
    const int64_t k = i / c, j = i % c;
    double p = 0;
    for (int64_t r = k * chunkRows, end = min(rows, (k + 1) * chunkRows); r < end; ++r)
      p += static_cast<double>(dy[r * c + j]) * x[r * c + j] * rstd[r];
    partial[k * c + j] = p;
  }
}

__global__ void rmsNormWeightSums(const double* partial, int64_t c, int64_t chunks, float* dw) {
  for (int64_t j = globalIndex(); j < c; j += globalStride()) {
    double sum = 0;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k * c + j];
    dw[j] = static_cast<float>(sum);
  }
}

// dx = rstd·(g − x·rstd²·mean(g·x)), g = dy·w.
__global__ void rmsNormInputGrad(const float* dy, const float* x, const float* w, const float* rstd,
                                 float* dx, int64_t rows, int64_t c) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *g = dy + r * c, *in = x + r * c;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      dot += static_cast<double>(g[j]) * w[j] * in[j];
    dot = blockSum(dot);
    const float s = rstd[r];
    const float k = static_cast<float>(dot / static_cast<double>(c)) * s * s;
    float* out = dx + r * c;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) out[j] = s * (g[j] * w[j] - in[j] * k);
  }
}

__device__ inline float sigmoidOf(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void swigluKernel(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float g = gate[i];
    y[i] = g * sigmoidOf(g) * up[i];
  }
}

__global__ void swigluGradKernel(const float* dy, const float* gate, const float* up, float* dgate,
                                 float* dup, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float d = dy[i], g = gate[i], u = up[i], s = sigmoidOf(g);
    dup[i] = d * g * s;
    dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
  }
}

// One thread per pair (j, j + D/2) of a row.
__global__ void rotaryKernel(const float* x, const float* cos, const float* sin, float* y,
                             int64_t pairs, int64_t t, int64_t d, bool transpose) {
  const int64_t h = d / 2;
  for (int64_t i = globalIndex(); i < pairs; i += globalStride()) {
    const int64_t r = i / h, j = i % h, at = r * d + j, tab = (r % t) * d + j;
    const float a = x[at], b = x[at + h];
    if (transpose) {
      y[at] = a * cos[tab] + b * sin[tab + h];
      y[at + h] = b * cos[tab + h] - a * sin[tab];
    } else {
      y[at] = a * cos[tab] - b * sin[tab];
      y[at + h] = b * cos[tab + h] + a * sin[tab + h];
    }
  }
}

}  // namespace

cudaError_t rotary(const float* x, const float* cos, const float* sin, float* y, int64_t n,
                   int64_t t, int64_t d, bool transpose, cudaStream_t stream) {
  const int64_t pairs = n / 2;
  if (pairs > 0 && d > 0 && t > 0)
    rotaryKernel<<<blocksFor(pairs), kThreads, 0, stream>>>(x, cos, sin, y, pairs, t, d, transpose);
  return cudaGetLastError();
}

cudaError_t rmsNorm(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t c,
                    float eps, cudaStream_t stream) {
  if (rows > 0 && c > 0)
    rmsNormKernel<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(x, w, y, rstd, rows, c, eps);
  return cudaGetLastError();
}

cudaError_t rmsNormGrad(const float* dy, const float* x, const float* w, const float* rstd,
                        float* dx, float* dw, int64_t rows, int64_t c, void* scratch,
                        cudaStream_t stream) {
  if (c <= 0) return cudaGetLastError();
  const int64_t chunks = layerNormGradChunks(rows), chunkRows = (rows + chunks - 1) / chunks;
  double* partial = static_cast<double*>(scratch);
  rmsNormWeightPartials<<<blocksFor(chunks * c), kThreads, 0, stream>>>(dy, x, rstd, rows, c,
                                                                        chunks, chunkRows, partial);
  rmsNormWeightSums<<<blocksFor(c), kThreads, 0, stream>>>(partial, c, chunks, dw);
  if (rows > 0)
    rmsNormInputGrad<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(dy, x, w, rstd, dx, rows, c);
  return cudaGetLastError();
}

cudaError_t swiglu(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) swigluKernel<<<blocksFor(n), kThreads, 0, stream>>>(gate, up, y, n);
  return cudaGetLastError();
}

cudaError_t swigluGrad(const float* dy, const float* gate, const float* up, float* dgate,
                       float* dup, int64_t n, cudaStream_t stream) {
  if (n > 0) swigluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(dy, gate, up, dgate, dup, n);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
