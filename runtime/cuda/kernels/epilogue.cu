// The fused linear epilogues' element-wise halves, for the steps cuBLASLt cannot fuse (see
// cuda_epilogue_table.cc): after the GEMM, one pass adds the bias (and applies GELU, keeping its
// input), or multiplies by GELU's derivative. The formulas are cpu/kernels/activations.cc's tanh
// branch, operation for operation (the plugin builds with --fmad=false), so this path meets the
// CPU's up to tanhf's last bit. A 16-bit y is that f32 value rounded by cpu/kernels/half.h's
// conversions, as the CPU rounds its widened result.
#include "common.cuh"
#include "gelu.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

template <Float Y>
__device__ inline void store(void* y, int64_t i, float v) {
  if constexpr (Y == Float::kF32)
    static_cast<float*>(y)[i] = v;
  else if constexpr (Y == Float::kBF16)
    static_cast<uint16_t*>(y)[i] = f32ToBf16(v);
  else
    static_cast<uint16_t*>(y)[i] = f32ToF16(v);
}

// `y` may be `sum` (f32 only): each element is read before it is written, by the same thread.
template <Float Y>
__global__ void biasAddKernel(const float* sum, const float* bias, void* y, int64_t total,
                              int64_t n) {
  for (int64_t i = globalIndex(); i < total; i += globalStride())
    store<Y>(y, i, sum[i] + bias[i % n]);
}

template <Float Y>
__global__ void biasGeluKernel(const float* sum, const float* bias, float* pre, void* y,
                               int64_t total, int64_t n) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    const float v = sum[i] + bias[i % n];
    pre[i] = v;
    store<Y>(y, i, geluTanh(v));
  }
}

template <Float Y>
__global__ void geluKernel(const float* pre, void* y, int64_t count) {
  for (int64_t i = globalIndex(); i < count; i += globalStride()) {
    store<Y>(y, i, geluTanh(pre[i]));
  }
}

__global__ void geluGradKernel(float* dx, const float* pre, int64_t count) {
  for (int64_t i = globalIndex(); i < count; i += globalStride()) {
    dx[i] = dx[i] * geluTanhDerivative(pre[i]);
  }
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

cudaError_t biasGelu(const float* sum, const float* bias, float* pre, void* y, Float yType,
                     int64_t rows, int64_t n, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total <= 0) return cudaGetLastError();
  const unsigned blocks = blocksFor(total);
  switch (yType) {
    case Float::kF32:
      biasGeluKernel<Float::kF32><<<blocks, kThreads, 0, stream>>>(sum, bias, pre, y, total, n);
      break;
    case Float::kBF16:
      biasGeluKernel<Float::kBF16><<<blocks, kThreads, 0, stream>>>(sum, bias, pre, y, total, n);
      break;
    case Float::kF16:
      biasGeluKernel<Float::kF16><<<blocks, kThreads, 0, stream>>>(sum, bias, pre, y, total, n);
      break;
  }
  return cudaGetLastError();
}

cudaError_t geluGradInPlace(float* dx, const float* pre, int64_t count, cudaStream_t stream) {
  if (count > 0) geluGradKernel<<<blocksFor(count), kThreads, 0, stream>>>(dx, pre, count);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
