// SwiGLU's gate, fused: silu(gate) · up and its gradients (cpu/kernels/swiglu.cc), each operand
// f32 or 16-bit.
#include "swiglu.h"

#include "common.cuh"
#include "float_access.cuh"

namespace dtc::cuda::kernels {
namespace {

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

}  // namespace

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
