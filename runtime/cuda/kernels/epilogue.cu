// The fused linear epilogues' element-wise halves, for the steps cuBLASLt cannot fuse (see
// cuda_epilogue_table.cc): after the GEMM, one pass adds the bias (and applies GELU, keeping its
// input), or multiplies by GELU's derivative. The formulas are cpu/activations.cc's tanh branch,
// operation for operation (the plugin builds with --fmad=false), so this path meets the CPU's
// up to tanhf's last bit.
#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCoeff = 0.044715f;

__global__ void biasAddKernel(float* sum, const float* bias, int64_t total, int64_t n) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) sum[i] = sum[i] + bias[i % n];
}

__global__ void biasGeluKernel(const float* sum, const float* bias, float* pre, float* y, int64_t total, int64_t n) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    const float v = sum[i] + bias[i % n];
    pre[i] = v;
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanhf(inner));
  }
}

__global__ void geluGradKernel(float* dx, const float* pre, int64_t count) {
  for (int64_t i = globalIndex(); i < count; i += globalStride()) {
    const float v = pre[i];
    const float inner = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    const float t = tanhf(inner);
    const float dInner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    dx[i] = dx[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dInner);
  }
}

}  // namespace

cudaError_t biasAdd(float* sum, const float* bias, int64_t rows, int64_t n, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total > 0) biasAddKernel<<<blocksFor(total), kThreads, 0, stream>>>(sum, bias, total, n);
  return cudaGetLastError();
}

cudaError_t biasGelu(const float* sum, const float* bias, float* pre, float* y, int64_t rows, int64_t n,
                     cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total > 0) biasGeluKernel<<<blocksFor(total), kThreads, 0, stream>>>(sum, bias, pre, y, total, n);
  return cudaGetLastError();
}

cudaError_t geluGradInPlace(float* dx, const float* pre, int64_t count, cudaStream_t stream) {
  if (count > 0) geluGradKernel<<<blocksFor(count), kThreads, 0, stream>>>(dx, pre, count);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
