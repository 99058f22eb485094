// The fused linear epilogues' element-wise halves, for the steps cuBLASLt cannot fuse (see
// cuda_epilogue_table.cc): after the GEMM, one pass adds the bias (and applies GELU, keeping its
// input), or multiplies by GELU's derivative. The formulas are cpu/kernels/activations.cc's tanh
// branch, operation for operation (the plugin builds with --fmad=false), so this path meets the
// CPU's up to tanhf's last bit. A 16-bit y is that f32 value rounded by support/half.h's
// conversions, as the CPU rounds its widened result; pre is stored in its own type (f32, or y's
// 16-bit type), chosen per launch.
#include "common.cuh"
#include "gelu.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

// `y` may be `sum` (f32 only): each element is read before it is written, by the same thread.
template <Float Y>
__global__ void biasAddKernel(const float* sum, const float* bias, void* y, int64_t total,
                              int64_t n) {
  for (int64_t i = globalIndex(); i < total; i += globalStride())
    store<Y>(y, i, sum[i] + bias[i % n]);
}

// y from the f32 sum, pre that sum stored in its type (the backward reads it as stored).
template <Float Y>
__global__ void biasGeluKernel(const float* sum, const float* bias, void* pre, Float preType,
                               void* y, int64_t total, int64_t n) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    const float v = sum[i] + bias[i % n];
    storeAs(preType, pre, i, v);
    store<Y>(y, i, geluTanh(v));
  }
}

template <Float Y>
__global__ void geluKernel(const float* pre, void* y, int64_t count) {
  for (int64_t i = globalIndex(); i < count; i += globalStride()) {
    store<Y>(y, i, geluTanh(pre[i]));
  }
}

// `dx` may be `sum` (f32 only): each element is read before it is written, by the same thread.
template <Float Y>
__global__ void geluGradKernel(const float* sum, const void* pre, Float preType, void* dx,
                               int64_t count) {
  for (int64_t i = globalIndex(); i < count; i += globalStride())
    store<Y>(dx, i, sum[i] * geluTanhDerivative(loadAs(preType, pre, i)));
}

// partial [chunks, n]: column sums of x [rows, n] over each chunk's rows, in row order.
template <Float X>
__global__ void columnPartialsKernel(const void* x, int64_t rows, int64_t n, int64_t chunks,
                                     int64_t chunkRows, double* partial) {
  for (int64_t i = globalIndex(); i < chunks * n; i += globalStride()) {
    const int64_t k = i / n, j = i % n;
    double sum = 0;
    for (int64_t r = k * chunkRows, end = min(rows, (k + 1) * chunkRows); r < end; ++r)
      sum += load<X>(x, r * n + j);
    partial[i] = sum;
  }
}

__global__ void columnTotalsKernel(const double* partial, int64_t n, int64_t chunks, float* out) {
  for (int64_t j = globalIndex(); j < n; j += globalStride()) {
    double sum = 0;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k * n + j];
    out[j] = static_cast<float>(sum);
  }
}

template <Float X>
void launchColumnPartials(const void* x, int64_t rows, int64_t n, int64_t chunks, int64_t chunkRows,
                          double* partial, cudaStream_t stream) {
  columnPartialsKernel<X>
      <<<blocksFor(chunks * n), kThreads, 0, stream>>>(x, rows, n, chunks, chunkRows, partial);
}

}  // namespace

cudaError_t biasAdd(const float* sum, const float* bias, void* y, Float yType, int64_t rows,
                    int64_t n, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total <= 0) return cudaGetLastError();
  const unsigned blocks = blocksFor(total);
  switch (yType) {
    case Float::kF32:
      biasAddKernel<Float::kF32><<<blocks, kThreads, 0, stream>>>(sum, bias, y, total, n);
      break;
    case Float::kBF16:
      biasAddKernel<Float::kBF16><<<blocks, kThreads, 0, stream>>>(sum, bias, y, total, n);
      break;
    case Float::kF16:
      biasAddKernel<Float::kF16><<<blocks, kThreads, 0, stream>>>(sum, bias, y, total, n);
      break;
  }
  return cudaGetLastError();
}

cudaError_t geluTanh(const float* pre, void* y, Float yType, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaGetLastError();
  const unsigned blocks = blocksFor(count);
  switch (yType) {
    case Float::kF32:
      geluKernel<Float::kF32><<<blocks, kThreads, 0, stream>>>(pre, y, count);
      break;
    case Float::kBF16:
      geluKernel<Float::kBF16><<<blocks, kThreads, 0, stream>>>(pre, y, count);
      break;
    case Float::kF16:
      geluKernel<Float::kF16><<<blocks, kThreads, 0, stream>>>(pre, y, count);
      break;
  }
  return cudaGetLastError();
}

cudaError_t biasGelu(const float* sum, const float* bias, void* pre, Float preType, void* y,
                     Float yType, int64_t rows, int64_t n, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total <= 0) return cudaGetLastError();
  const unsigned blocks = blocksFor(total);
  switch (yType) {
    case Float::kF32:
      biasGeluKernel<Float::kF32>
          <<<blocks, kThreads, 0, stream>>>(sum, bias, pre, preType, y, total, n);
      break;
    case Float::kBF16:
      biasGeluKernel<Float::kBF16>
          <<<blocks, kThreads, 0, stream>>>(sum, bias, pre, preType, y, total, n);
      break;
    case Float::kF16:
      biasGeluKernel<Float::kF16>
          <<<blocks, kThreads, 0, stream>>>(sum, bias, pre, preType, y, total, n);
      break;
  }
  return cudaGetLastError();
}

cudaError_t geluGrad(const float* sum, const void* pre, Float preType, void* dx, Float dxType,
                     int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaGetLastError();
  const unsigned blocks = blocksFor(count);
  switch (dxType) {
    case Float::kF32:
      geluGradKernel<Float::kF32><<<blocks, kThreads, 0, stream>>>(sum, pre, preType, dx, count);
      break;
    case Float::kBF16:
      geluGradKernel<Float::kBF16><<<blocks, kThreads, 0, stream>>>(sum, pre, preType, dx, count);
      break;
    case Float::kF16:
      geluGradKernel<Float::kF16><<<blocks, kThreads, 0, stream>>>(sum, pre, preType, dx, count);
      break;
  }
  return cudaGetLastError();
}

cudaError_t columnSums(const void* x, Float xType, int64_t rows, int64_t n, void* scratch,
                       float* out, cudaStream_t stream) {
  if (n <= 0) return cudaGetLastError();
  const int64_t chunks = layerNormGradChunks(rows), chunkRows = (rows + chunks - 1) / chunks;
  double* partial = static_cast<double*>(scratch);
  switch (xType) {
    case Float::kF32:
      launchColumnPartials<Float::kF32>(x, rows, n, chunks, chunkRows, partial, stream);
      break;
    case Float::kBF16:
      launchColumnPartials<Float::kBF16>(x, rows, n, chunks, chunkRows, partial, stream);
      break;
    case Float::kF16:
      launchColumnPartials<Float::kF16>(x, rows, n, chunks, chunkRows, partial, stream);
      break;
  }
  columnTotalsKernel<<<blocksFor(n), kThreads, 0, stream>>>(partial, n, chunks, out);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
