// RMSNorm (with the residual add before it, or after its gradient), SwiGLU's gate, fused, rotary
// embeddings, and their gradients
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

// With `res.data`, the row is x + res (the residual add, rounded as add rounds it), also written to
// `sum`.
__device__ inline float rowAt(FloatIn x, FloatIn res, int64_t i) {
  return res.data ? __fadd_rn(at(x, i), at(res, i)) : at(x, i);
}

__global__ void rmsNormKernel(FloatIn x, FloatIn res, FloatOut sum, FloatIn w, FloatOut y,
                              FloatOut rstd, int64_t rows, int64_t c, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * c;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float v = rowAt(x, res, row + j);
      if (res.data) put(sum, row + j, v);
      sq += static_cast<double>(v) * v;
    }
    sq = blockSum(sq);
    const float s = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(c) + eps));
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      put(y, row + j, rowAt(x, res, row + j) * s * at(w, j));
    if (threadIdx.x == 0) put(rstd, r, s);
  }
}

// The parts of dy, summed left to right as they are read (the adds they replace).
struct DyParts {
  FloatIn part[kRmsNormGradParts];
  int count = 1;
};
__device__ inline float dyAt(const DyParts& dy, int64_t i) {
  float v = at(dy.part[0], i);
  for (int p = 1; p < dy.count; ++p) v = __fadd_rn(v, at(dy.part[p], i));
  return v;
}

// partial [chunks, C]: Σ dy·x·rstd over the chunk's rows, per column.
__global__ void rmsNormWeightPartials(DyParts dy, FloatIn x, FloatIn rstd, int64_t rows, int64_t c,
                                      int64_t chunks, int64_t chunkRows, double* partial) {
  for (int64_t i = globalIndex(); i < chunks * c; i += globalStride()) {
    const int64_t k = i / c, j = i % c;
    double p = 0;
    for (int64_t r = k * chunkRows, end = min(rows, (k + 1) * chunkRows); r < end; ++r)
      p += static_cast<double>(dyAt(dy, r * c + j)) * at(x, r * c + j) * at(rstd, r);
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

// dx = rstd·(g − x·rstd²·mean(g·x)), g = dy·w; with `res.data`, dx + res, also rounded into
// `rounded` where that is given.
__global__ void rmsNormInputGrad(DyParts dy, FloatIn x, FloatIn w, FloatIn rstd, FloatOut dx,
                                 FloatIn res, FloatOut rounded, int64_t rows, int64_t c) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * c;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      dot += static_cast<double>(dyAt(dy, row + j)) * at(w, j) * at(x, row + j);
    dot = blockSum(dot);
    const float s = at(rstd, r);
    const float k = static_cast<float>(dot / static_cast<double>(c)) * s * s;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      float v = s * (dyAt(dy, row + j) * at(w, j) - at(x, row + j) * k);
      if (res.data) v = __fadd_rn(at(res, row + j), v);
      put(dx, row + j, v);
      if (rounded.data) put(rounded, row + j, v);
    }
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

// One thread per pair (j, j + D/2) of a row; `heads` rows share a position.
__global__ void rotaryKernel(FloatIn x, FloatIn cos, FloatIn sin, FloatOut y, int64_t pairs,
                             int64_t t, int64_t d, int64_t heads, bool transpose) {
  const int64_t h = d / 2;
  for (int64_t i = globalIndex(); i < pairs; i += globalStride()) {
    const int64_t r = i / h, j = i % h, e = r * d + j, tab = ((r / heads) % t) * d + j;
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
                   int64_t heads, bool transpose, cudaStream_t stream) {
  const int64_t pairs = n / 2;
  if (pairs > 0 && d > 0 && t > 0 && heads > 0)
    rotaryKernel<<<blocksFor(pairs), kThreads, 0, stream>>>(x, cos, sin, y, pairs, t, d, heads,
                                                            transpose);
  return cudaGetLastError();
}

cudaError_t rmsNorm(FloatIn x, FloatIn w, FloatOut y, FloatOut rstd, int64_t rows, int64_t c,
                    float eps, cudaStream_t stream, FloatIn res, FloatOut sum) {
  if (rows > 0 && c > 0)
    rmsNormKernel<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(x, res, sum, w, y, rstd, rows, c,
                                                                 eps);
  return cudaGetLastError();
}

cudaError_t rmsNormGrad(const FloatIn* dyParts, int parts, FloatIn x, FloatIn w, FloatIn rstd,
                        FloatOut dx, FloatOut dw, int64_t rows, int64_t c, void* scratch,
                        cudaStream_t stream, FloatIn res, FloatOut rounded) {
  if (parts < 1 || parts > static_cast<int>(kRmsNormGradParts)) return cudaErrorInvalidValue;
  if (c <= 0) return cudaGetLastError();
  DyParts dy;
  dy.count = parts;
  for (int p = 0; p < parts; ++p) dy.part[p] = dyParts[p];
  const int64_t chunks = layerNormGradChunks(rows), chunkRows = (rows + chunks - 1) / chunks;
  double* partial = static_cast<double*>(scratch);
  rmsNormWeightPartials<<<blocksFor(chunks * c), kThreads, 0, stream>>>(dy, x, rstd, rows, c,
                                                                        chunks, chunkRows, partial);
  rmsNormWeightSums<<<blocksFor(c), kThreads, 0, stream>>>(partial, c, chunks, dw);
  if (rows > 0)
    rmsNormInputGrad<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(dy, x, w, rstd, dx, res,
                                                                    rounded, rows, c);
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
