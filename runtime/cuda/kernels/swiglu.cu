// SwiGLU's gate, fused: silu(gate) · up and its gradients (cpu/kernels/swiglu.cc), each operand
// f32 or 16-bit, and their binders with the CPU's contracts.
#include "common.cuh"
#include "cuda_bind.h"
#include "exec/transformer_contracts.h"
#include "float_access.cuh"
#include "float_data.h"

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

cudaError_t swiglu(FloatIn gate, FloatIn up, FloatOut y, int64_t n, cudaStream_t stream) {
  if (n > 0) swigluKernel<<<blocksFor(n), kThreads, 0, stream>>>(gate, up, y, n);
  return cudaGetLastError();
}

cudaError_t swigluGrad(FloatIn dy, FloatIn gate, FloatIn up, FloatOut dgate, FloatOut dup,
                       int64_t n, cudaStream_t stream) {
  if (n > 0) swigluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(dy, gate, up, dgate, dup, n);
  return cudaGetLastError();
}

}  // namespace
}  // namespace dtc::cuda::kernels

namespace dtc::cuda {
namespace {

StatusOr<BoundStep> bindSwiglu(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const StepContext f32, widenedForm(ctx));
  DTC_ASSIGN_OR_RETURN(const int64_t n, checkSwiglu(f32));
  const kernels::FloatIn gate = in(ctx.inputs[0]), up = in(ctx.inputs[1]);
  const kernels::FloatOut y = out(ctx.outputs[0]);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::swiglu(gate, up, y, n, stream), where); });
}

StatusOr<BoundStep> bindSwigluGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const StepContext f32, widenedForm(ctx));
  DTC_ASSIGN_OR_RETURN(const int64_t n, checkSwiglu(f32));
  const kernels::FloatIn dy = in(ctx.inputs[0]), gate = in(ctx.inputs[1]), up = in(ctx.inputs[2]);
  const kernels::FloatOut dgate = out(ctx.outputs[0]), dup = out(ctx.outputs[1]);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::swigluGrad(dy, gate, up, dgate, dup, n, stream), where); });
}

}  // namespace

DTC_CUDA_BINDER(swiglu, bindSwiglu)
DTC_CUDA_BINDER(swiglu_grad, bindSwigluGrad)

}  // namespace dtc::cuda
