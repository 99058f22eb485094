// SwiGLU's gate silu(gate)·up, fused, and its gradients, element by element; their binders
// check exec/transformer_contracts.h.
#include <cmath>

#include "cpu/cpu_binders.h"
#include "exec/transformer_contracts.h"

namespace dtc {
namespace {

constexpr int64_t kGrainFloats = 8192;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void swiglu(const float* gate, const float* up, float* y, int64_t n, ThreadPool& pool) {
  pool.parallelFor(n, kGrainFloats, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = gate[i] * sigmoid(gate[i]) * up[i];
  });
}

void swigluGrad(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                int64_t n, ThreadPool& pool) {
  // d silu(g)/dg = s·(1 + g·(1 − s)), s = sigmoid(g).
  pool.parallelFor(n, kGrainFloats, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i], s = sigmoid(g);
      dup[i] = dy[i] * g * s;
      dgate[i] = dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
    }
  });
}

StatusOr<BoundStep> bindSwiglu(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const int64_t n, checkSwiglu(ctx));
  TensorView gate = ctx.inputs[0], up = ctx.inputs[1], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    swiglu(gate.f32(), up.f32(), y.f32(), n, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSwigluGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const int64_t n, checkSwiglu(ctx));
  TensorView dy = ctx.inputs[0], gate = ctx.inputs[1], up = ctx.inputs[2];
  TensorView dgate = ctx.outputs[0], dup = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    swigluGrad(dy.f32(), gate.f32(), up.f32(), dgate.f32(), dup.f32(), n, *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(swiglu, bindSwiglu)
DTC_CPU_BINDER(swiglu_grad, bindSwigluGrad)

}  // namespace dtc
