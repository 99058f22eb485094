// The CPU backend's binders, one per kernel of ops/kernels.def, declared from it: a table file
// defines each with DTC_CPU_BINDER, and the dispatch (cpu_dispatch.cc) indexes them by kernel
// code. A kernel without a CPU binder is a link error naming bindCpu_<kernel>.
#pragma once

#include <memory>
#include <vector>

#include "exec/core_contracts.h"

namespace dtc {

#define DTC_KERNEL(name, code, types, family, contract) \
  StatusOr<BoundStep> bindCpu_##name(const StepContext& ctx);
#define DTC_POINTWISE(name, code, grad_name, grad_code, Math)  // generated in cpu_dispatch.cc
#include "ops/kernels.def"

// Defines kernel `name`'s CPU binder as a call of the binder that follows (a function, or a
// template instance, whose arguments may hold commas).
#define DTC_CPU_BINDER(name, ...) \
  StatusOr<BoundStep> bindCpu_##name(const StepContext& ctx) { return __VA_ARGS__(ctx); }

// Unary element-wise ops: y = f(x).
template <void (*Fn)(const float*, float*, int64_t, ThreadPool&)>
StatusOr<BoundStep> bindUnary(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkUnary(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    Fn(x.f32(), y.f32(), x.numElements(), *pool);
    return Status::Ok();
  });
}

// Activation gradients: dx = g(dy, at).
template <void (*Fn)(const float*, const float*, float*, int64_t, ThreadPool&)>
StatusOr<BoundStep> bindActivationGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkActivationGrad(ctx));
  TensorView dy = ctx.inputs[0], at = ctx.inputs[1], dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    Fn(dy.f32(), at.f32(), dx.f32(), dy.numElements(), *pool);
    return Status::Ok();
  });
}

// 16-bit (or f32) data to f32 and back, rounding to nearest even (support/half.h).
void toF32(const TensorView& from, float* to);
void fromF32(const float* from, const TensorView& to);

// A step on bf16/f16 operands run by its float32 binder `wide` on widened copies, the results
// rounded back (cpu_kernel_table.cc).
StatusOr<BoundStep> bindWidened(const StepContext& ctx, Binder wide);

// `bytes` of working memory for a step: its planned scratch (ops/step_scratch.h) when the plan
// holds that much; else (a plan compiled for another device plans none) a buffer the step owns,
// aligned as planned scratch and counted as memory beyond the plan.
struct StepBuffer {
  uint8_t* data = nullptr;
  std::shared_ptr<std::vector<uint8_t>> owned;  // null when the plan holds it
};
StepBuffer stepBuffer(const StepContext& ctx, uint64_t bytes);

}  // namespace dtc
