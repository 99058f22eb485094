// Shared pieces of the CUDA binders: the CPU's contract helpers (exec/bind_util.h) and the
// launch checks. Every binder validates exactly what its CPU counterpart does, then captures
// device pointers, the stream and its step's location in the closure it returns.
#pragma once

#include <string>

#include "cuda_binders.h"
#include "cuda_check.h"
#include "cuda_device.h"
#include "exec/bind_util.h"
#include "exec/core_contracts.h"
#include "exec/precision_contracts.h"
#include "kernels/launchers.h"

namespace dtc::cuda {

// The shapes bound steps see, with the kernels' name for them.
using kernels::Shape;

// The kernels' name for a float element type: f32, or mixed precision's 16-bit types.
inline kernels::Float floatOf(DType t) {
  return t == DType::kBF16  ? kernels::Float::kBF16
         : t == DType::kF16 ? kernels::Float::kF16
                            : kernels::Float::kF32;
}

// The contractions' arity and element types: float32 under the CPU's contract (expect(), the
// same messages), or bfloat16 / float16 for both inputs alike (mixed precision: cuBLAS takes them
// as they are and accumulates in f32) with the output in that type (rounded once) or in f32
// (never rounded: a weight gradient for f32 master weights).
struct ContractionTypes {
  cudaDataType_t type = CUDA_R_32F;  // the inputs'
  bool f32Output = false;            // 16-bit inputs, an f32 output
};

inline StatusOr<ContractionTypes> contractionTypes(const StepContext& ctx) {
  const DType in = ctx.inputs.empty() ? DType::kF32 : ctx.inputs[0].dtype;
  const DType out = ctx.outputs.size() == 1 ? ctx.outputs[0].dtype : DType::kF32;
  const DType t = out == DType::kF32 && (in == DType::kBF16 || in == DType::kF16) ? in : out;
  if (t != DType::kBF16 && t != DType::kF16) {
    DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
    return ContractionTypes{};
  }
  if (ctx.inputs.size() != 2 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 2 inputs and 1 outputs");
  for (const TensorView& x : ctx.inputs)
    if (x.dtype != t)
      return invalid(ctx, "operands must share one element type, got " + dtypeName(x.dtype) +
                              " and " + dtypeName(t));
  return ContractionTypes{t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F, out == DType::kF32};
}

// y = f(x) under the unary contract, run by `launch(x, y, n, stream)` on the device's stream.
template <typename Launch>
StatusOr<BoundStep> bindUnaryLaunch(const StepContext& ctx, Device& dev, Launch launch) {
  DTC_RETURN_IF_ERROR(checkUnary(ctx));
  const float* x = ctx.inputs[0].f32();
  float* y = ctx.outputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(launch(x, y, n, stream), where); });
}

// dx = dy · f'(at) under the activation-gradient contract, run by `launch(dy, at, dx, n, stream)`.
template <typename Launch>
StatusOr<BoundStep> bindUnaryGradLaunch(const StepContext& ctx, Device& dev, Launch launch) {
  DTC_RETURN_IF_ERROR(checkActivationGrad(ctx));
  const float *dy = ctx.inputs[0].f32(), *at = ctx.inputs[1].f32();
  float* dx = ctx.outputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(launch(dy, at, dx, n, stream), where); });
}

// `bytes` of scratch for the step: its planned scratch (ctx.scratch, in the function's arena,
// sized by the compiler with ops/step_scratch.h) when that holds them, else memory of the step's
// own (or the device's shared slot `sharedSlot`, when not negative), which the backend reports
// as beyond the plan. Null for 0 bytes.
inline StatusOr<uint8_t*> stepScratch(const StepContext& ctx, Device& dev, uint64_t bytes,
                                      int sharedSlot = -1) {
  if (bytes == 0) return static_cast<uint8_t*>(nullptr);
  if (ctx.scratch && ctx.scratchBytes >= bytes) return ctx.scratch;
  StatusOr<void*> own = sharedSlot >= 0 ? dev.sharedScratch(sharedSlot, bytes) : dev.scratch(bytes);
  if (!own.ok()) return own.status();
  return static_cast<uint8_t*>(*own);
}

// A raised-flag message for data errors found on the device (see Device::errorFlag).
inline StatusOr<int*> dataErrorFlag(Device& device, const StepContext& ctx,
                                    const std::string& message) {
  return device.errorFlag(ctx.where() + message);
}

// The operands of kernels that take FloatIn/FloatOut (kernels/float_data.h: RMSNorm, SwiGLU,
// rotary): each float32 or the step's one 16-bit type, the contract checked on their float32
// form, as the CPU checks the widened copies it runs (bindWidened), so that both refuse alike.
inline StatusOr<StepContext> widenedForm(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(sharedLowPrecision(ctx).status());
  StepContext f32 = ctx;
  for (auto* list : {&f32.inputs, &f32.outputs})
    for (TensorView& t : *list)
      if (lowPrecision(t.dtype)) t.dtype = DType::kF32;
  return f32;
}
inline kernels::FloatIn in(const TensorView& t) { return {t.data, floatOf(t.dtype)}; }
inline kernels::FloatOut out(const TensorView& t) { return {t.data, floatOf(t.dtype)}; }

}  // namespace dtc::cuda
