// LayerNorm over the last dimension and its gradient (cpu/kernels/layer_norm.cc): row statistics in
// double (two passes for the variance), one block per row. dw/db are column sums over row
// chunks fixed by the shape, added in chunk order: deterministic, no atomics.
#include <algorithm>

#include "common.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

// y in f32, or rounded to bf16/f16 once (dtc-fold-casts folds the cast to a 16-bit
// contraction's input into the LayerNorm): Store turns the f32 value into y's element.
struct StoreF32 {
  using Element = float;
  __device__ static float from(float v) { return v; }
};
struct StoreBf16 {
  using Element = uint16_t;
  __device__ static uint16_t from(float v) { return f32ToBf16(v); }
};
struct StoreF16 {
  using Element = uint16_t;
  __device__ static uint16_t from(float v) { return f32ToF16(v); }
};

// With `residual`, the row normalised is x + residual (as add computes it), written to `sum`
// first (each thread reads back what it wrote).
template <typename Store>
__global__ void layerNormKernel(const float* x, const float* w, const float* b,
                                typename Store::Element* y, float* mean, float* rstd, int64_t rows,
                                int64_t c, float eps, const float* residual, float* sum) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (residual)
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
        sum[r * c + j] = x[r * c + j] + residual[r * c + j];
    const float* in = (residual ? sum : x) + r * c;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) sum += in[j];
    const double mu = blockSum(sum) / static_cast<double>(c);
    double sq = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const double d = in[j] - mu;
      sq += d * d;
    }
    sq = blockSum(sq);
    const float m = static_cast<float>(mu);
    const float s = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(c) + eps));
    typename Store::Element* out = y + r * c;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      out[j] = Store::from((in[j] - m) * s * w[j] + b[j]);
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

// dy in f32, or bf16/f16 (a 16-bit contraction's input gradient) widened as it is read.
__device__ inline float loadDy(const float* dy, int64_t i) { return dy[i]; }
struct Bf16Dy {
  const uint16_t* p;
};
struct F16Dy {
  const uint16_t* p;
};
__device__ inline float loadDy(Bf16Dy dy, int64_t i) { return bf16ToF32(dy.p[i]); }
__device__ inline float loadDy(F16Dy dy, int64_t i) { return f16ToF32(dy.p[i]); }

// partial [chunks, 2, C]: Σ dy·xhat and Σ dy over the chunk's rows, per column.
template <typename Dy>
__global__ void layerNormWeightPartials(Dy dy, const float* x, const float* mean, const float* rstd,
                                        int64_t rows, int64_t c, int64_t chunks, int64_t chunkRows,
                                        double* partial) {
  for (int64_t i = globalIndex(); i < chunks * c; i += globalStride()) {
    const int64_t k = i / c, j = i % c;
    double pw = 0, pb = 0;
    for (int64_t r = k * chunkRows, end = min(rows, (k + 1) * chunkRows); r < end; ++r) {
      const double xhat =
          (x[r * c + j] - static_cast<double>(mean[r])) * static_cast<double>(rstd[r]);
      const float g = loadDy(dy, r * c + j);
      pw += g * xhat;
      pb += g;
    }
    partial[k * 2 * c + j] = pw;
    partial[k * 2 * c + c + j] = pb;
  }
}

__global__ void layerNormWeightSums(const double* partial, int64_t c, int64_t chunks, float* dw,
                                    float* db) {
  for (int64_t j = globalIndex(); j < c; j += globalStride()) {
    double sw = 0, sb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      sw += partial[k * 2 * c + j];
      sb += partial[k * 2 * c + c + j];
    }
    dw[j] = static_cast<float>(sw);
    db[j] = static_cast<float>(sb);
  }
}

// dx = rstd · (gw − mean(gw) − xhat · mean(gw · xhat)), gw = dy·w, in double.
// With `residual`, dx is written as residual + dx (as add adds it), and with `rounded` also that
// sum in `roundedType` (bf16/f16).
template <typename Dy>
__global__ void layerNormInputGrad(Dy dy, const float* x, const float* w, const float* mean,
                                   const float* rstd, float* dx, int64_t rows, int64_t c,
                                   const float* residual, uint16_t* rounded, Float roundedType) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * c;
    const float* in = x + r * c;
    const double m = mean[r], s = rstd[r];
    double sumG = 0, sumGX = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const double xhat = (in[j] - m) * s;
      const double gw = static_cast<double>(loadDy(dy, row + j)) * w[j];
      sumG += gw;
      sumGX += gw * xhat;
    }
    const double meanG = blockSum(sumG) / static_cast<double>(c);
    const double meanGX = blockSum(sumGX) / static_cast<double>(c);
    float* out = dx + r * c;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const double xhat = (in[j] - m) * s;
      const double gw = static_cast<double>(loadDy(dy, row + j)) * w[j];
      float v = static_cast<float>(s * (gw - meanG - xhat * meanGX));
      if (residual) v = residual[row + j] + v;
      out[j] = v;
      if (rounded) rounded[row + j] = roundedType == Float::kBF16 ? f32ToBf16(v) : f32ToF16(v);
    }
  }
}

}  // namespace

cudaError_t layerNorm(const float* x, const float* w, const float* b, void* y, Float yType,
                      float* mean, float* rstd, int64_t rows, int64_t c, float eps,
                      cudaStream_t stream, const float* residual, float* sum) {
  if (rows == 0) return cudaGetLastError();
  const unsigned blocks = rowBlocks(rows), threads = rowThreads(c);
  switch (yType) {
    case Float::kF32:
      layerNormKernel<StoreF32><<<blocks, threads, 0, stream>>>(
          x, w, b, static_cast<float*>(y), mean, rstd, rows, c, eps, residual, sum);
      break;
    case Float::kBF16:
      layerNormKernel<StoreBf16><<<blocks, threads, 0, stream>>>(
          x, w, b, static_cast<uint16_t*>(y), mean, rstd, rows, c, eps, residual, sum);
      break;
    case Float::kF16:
      layerNormKernel<StoreF16><<<blocks, threads, 0, stream>>>(
          x, w, b, static_cast<uint16_t*>(y), mean, rstd, rows, c, eps, residual, sum);
      break;
  }
  return cudaGetLastError();
}

namespace {

template <typename Dy>
cudaError_t layerNormGradOf(Dy dy, const float* x, const float* w, const float* mean,
                            const float* rstd, float* dx, float* dw, float* db, int64_t rows,
                            int64_t c, void* scratch, cudaStream_t stream,
                            const LayerNormGradAdd& add) {
  if (c <= 0) return cudaGetLastError();
  const int64_t chunks = layerNormGradChunks(rows), chunkRows = (rows + chunks - 1) / chunks;
  double* partial = static_cast<double*>(scratch);
  // Weight gradients first: dx may alias dy or x.
  layerNormWeightPartials<<<blocksFor(chunks * c), kThreads, 0, stream>>>(
      dy, x, mean, rstd, rows, c, chunks, chunkRows, partial);
  layerNormWeightSums<<<blocksFor(c), kThreads, 0, stream>>>(partial, c, chunks, dw, db);
  if (rows > 0)
    layerNormInputGrad<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(
        dy, x, w, mean, rstd, dx, rows, c, add.residual, static_cast<uint16_t*>(add.rounded),
        add.roundedType);
  return cudaGetLastError();
}

}  // namespace

cudaError_t layerNormGrad(const void* dy, Float dyType, const float* x, const float* w,
                          const float* mean, const float* rstd, float* dx, float* dw, float* db,
                          int64_t rows, int64_t c, void* scratch, cudaStream_t stream,
                          const LayerNormGradAdd& add) {
  const auto* low = static_cast<const uint16_t*>(dy);
  switch (dyType) {
    case Float::kF32:
      return layerNormGradOf(static_cast<const float*>(dy), x, w, mean, rstd, dx, dw, db, rows, c,
                             scratch, stream, add);
    case Float::kBF16:
      return layerNormGradOf(Bf16Dy{low}, x, w, mean, rstd, dx, dw, db, rows, c, scratch, stream,
                             add);
    case Float::kF16:
      return layerNormGradOf(F16Dy{low}, x, w, mean, rstd, dx, dw, db, rows, c, scratch, stream,
                             add);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dtc::cuda::kernels
