// Rotary embeddings and their gradient (cpu/kernels/rotary.cc), each operand f32 or 16-bit, and
// their binders with the CPU's contracts.
#include "common.cuh"
#include "cuda_bind.h"
#include "exec/transformer_contracts.h"
#include "float_access.cuh"
#include "float_data.h"

namespace dtc::cuda::kernels {
namespace {

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

// n elements of rows of D, `heads` consecutive rows at each of T positions in turn, against
// tables [T, D]; `transpose`: the gradient.
cudaError_t rotary(FloatIn x, FloatIn cos, FloatIn sin, FloatOut y, int64_t n, int64_t t, int64_t d,
                   int64_t heads, bool transpose, cudaStream_t stream) {
  const int64_t pairs = n / 2;
  if (pairs > 0 && d > 0 && t > 0 && heads > 0)
    rotaryKernel<<<blocksFor(pairs), kThreads, 0, stream>>>(x, cos, sin, y, pairs, t, d, heads,
                                                            transpose);
  return cudaGetLastError();
}

}  // namespace
}  // namespace dtc::cuda::kernels

namespace dtc::cuda {
namespace {

template <bool kTranspose>
StatusOr<BoundStep> bindRotary(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const StepContext f32, widenedForm(ctx));
  DTC_ASSIGN_OR_RETURN(const RotaryDims d, checkRotary(f32));
  const kernels::FloatIn x = in(ctx.inputs[0]), cos = in(ctx.inputs[1]), sin = in(ctx.inputs[2]);
  const kernels::FloatOut y = out(ctx.outputs[0]);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::rotary(x, cos, sin, y, d.n, d.t, d.d, d.heads, kTranspose, stream),
                    where);
  });
}

}  // namespace

DTC_CUDA_BINDER(rotary, bindRotary<false>)
DTC_CUDA_BINDER(rotary_grad, bindRotary<true>)

}  // namespace dtc::cuda
