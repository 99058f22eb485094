// RMSNorm and SwiGLU's gate, fused, rotary embeddings, and their gradients
// (cpu/kernels/llama_blocks.cc): row sums in double, one block per row; the weight's gradient as
// column sums over row chunks fixed by the shape (LayerNorm's chunks and scratch), added in chunk
// order: deterministic, no atomics. Every activation operand may be stored in 16 bits (FloatIn,
// FloatOut): widened as it is read, rounded once as it is written, the math f32 as on the CPU's
// widened copies, so both backends round the same f32 values.
#include <algorithm>

#include "common.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

__device__ inline float at(FloatIn x, int64_t i) { return loadAs(x.type, x.data, i); }
__device__ inline void put(FloatOut y, int64_t i, float v) { storeAs(y.type, y.data, i, v); }

__global__ void rmsNormKernel(FloatIn x, FloatIn w, FloatOut y, FloatOut rstd, int64_t rows,
                              int64_t c, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * c;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float v = at(x, row + j);
      sq += static_cast<double>(v) * v;
    }
    sq = blockSum(sq);
    const float s = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(c) + eps));
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      put(y, row + j, at(x, row + j) * s * at(w, j));
    if (threadIdx.x == 0) put(rstd, r, s);
  }
}

// partial [chunks, C]: Σ dy·x·rstd over the chunk's rows, per column.
__global__ void rmsNormWeightPartials(FloatIn dy, FloatIn x, FloatIn rstd, int64_t rows, int64_t c,
                                      int64_t chunks, int64_t chunkRows, double* partial) {
  for (int64_t i = globalIndex(); i < chunks * c; i += globalStride()) {
    const int64_t k = i / c, j = i % c;
    double p = 0;
    for (int64_t r = k * chunkRows, end = min(rows, (k + 1) * chunkRows); r < end; ++r)
      p += static_cast<double>(at(dy, r * c + j)) * at(x, r * c + j) * at(rstd, r);
    partial[k * c + j] = p;
  }
}

__global__ void rmsNormWeightSums(const double* partial, int64_t c, int64_t chunks, FloatOut dw) {
  for (int64_t j = globalIndex(); j < c; j += globalStride()) {
    double sum = 0;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k * c + j];
    put(dw, j, static_cast<float>(sum));
  }
}

// dx = rstd·(g − x·rstd²·mean(g·x)), g = dy·w.
__global__ void rmsNormInputGrad(FloatIn dy, FloatIn x, FloatIn w, FloatIn rstd, FloatOut dx,
                                 int64_t rows, int64_t c) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * c;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      dot += static_cast<double>(at(dy, row + j)) * at(w, j) * at(x, row + j);
    dot = blockSum(dot);
    const float s = at(rstd, r);
    const float k = static_cast<float>(dot / static_cast<double>(c)) * s * s;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      put(dx, row + j, s * (at(dy, row + j) * at(w, j) - at(x, row + j) * k));
  }
}

__device__ inline float sigmoidOf(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void swigluKernel(FloatIn gate, FloatIn up, FloatOut y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float g = at(gate, i);
    put(y, i, g * sigmoidOf(g) * at(up, i));
  }
}

__global__ void swigluGradKernel(FloatIn dy, FloatIn gate, FloatIn up, FloatOut dgate, FloatOut dup,
                                 int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float d = at(dy, i), g = at(gate, i), u = at(up, i), s = sigmoidOf(g);
    put(dup, i, d * g * s);
    put(dgate, i, d * u * s * (1.0f + g * (1.0f - s)));
  }
}

// One thread per pair (j, j + D/2) of a row.
__global__ void rotaryKernel(FloatIn x, FloatIn cos, FloatIn sin, FloatOut y, int64_t pairs,
                             int64_t t, int64_t d, bool transpose) {
  const int64_t h = d / 2;
  for (int64_t i = globalIndex(); i < pairs; i += globalStride()) {
    const int64_t r = i / h, j = i % h, e = r * d + j, tab = (r % t) * d + j;
    const float a = at(x, e), b = at(x, e + h);
    if (transpose) {
      put(y, e, a * at(cos, tab) + b * at(sin, tab + h));
      put(y, e + h, b * at(cos, tab + h) - a * at(sin, tab));
    } else {
      put(y, e, a * at(cos, tab) - b * at(sin, tab));
      put(y, e + h, b * at(cos, tab + h) + a * at(sin, tab + h));
    }
  }
}

}  // namespace

cudaError_t rotary(FloatIn x, FloatIn cos, FloatIn sin, FloatOut y, int64_t n, int64_t t, int64_t d,
                   bool transpose, cudaStream_t stream) {
  const int64_t pairs = n / 2;
  if (pairs > 0 && d > 0 && t > 0)
    rotaryKernel<<<blocksFor(pairs), kThreads, 0, stream>>>(x, cos, sin, y, pairs, t, d, transpose);
  return cudaGetLastError();
}

cudaError_t rmsNorm(FloatIn x, FloatIn w, FloatOut y, FloatOut rstd, int64_t rows, int64_t c,
                    float eps, cudaStream_t stream) {
  if (rows > 0 && c > 0)
    rmsNormKernel<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(x, w, y, rstd, rows, c, eps);
  return cudaGetLastError();
}

cudaError_t rmsNormGrad(FloatIn dy, FloatIn x, FloatIn w, FloatIn rstd, FloatOut dx, FloatOut dw,
                        int64_t rows, int64_t c, void* scratch, cudaStream_t stream) {
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

cudaError_t swiglu(FloatIn gate, FloatIn up, FloatOut y, int64_t n, cudaStream_t stream) {
  if (n > 0) swigluKernel<<<blocksFor(n), kThreads, 0, stream>>>(gate, up, y, n);
  return cudaGetLastError();
}

cudaError_t swigluGrad(FloatIn dy, FloatIn gate, FloatIn up, FloatOut dgate, FloatOut dup,
                       int64_t n, cudaStream_t stream) {
  if (n > 0) swigluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(dy, gate, up, dgate, dup, n);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
