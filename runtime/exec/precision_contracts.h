// The operand contracts of mixed precision and loss scaling: casts and
// the dynamic loss scale's steps (cpu/cpu_precision_table.cc), shared by the CPU and CUDA kernel
// tables so both backends accept the same steps and refuse the others with the same messages.
#pragma once

#include "exec/bind_util.h"

namespace dtc {

// bfloat16 or float16: the 16-bit float types of mixed precision.
inline bool lowPrecision(DType t) { return t == DType::kBF16 || t == DType::kF16; }

// The step's first 16-bit operand (inputs, then outputs), or null.
inline const TensorView* firstLowPrecision(const StepContext& ctx) {
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (lowPrecision(t.dtype)) return &t;
  return nullptr;
}

// The 16-bit type a step's 16-bit operands share (f32 when it has none; f32 operands beside
// them, such as attention's log-sum-exp, do not count), or the error naming two that differ.
inline StatusOr<DType> sharedLowPrecision(const StepContext& ctx) {
  DType low = DType::kF32;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list) {
      if (!lowPrecision(t.dtype)) continue;
      if (low != DType::kF32 && t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) +
                                " and " + dtypeName(t.dtype));
      low = t.dtype;
    }
  return low;
}

// cast: y = x in y's element type (f32, bf16, f16), one shape.
inline Status checkCast(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 1 input and 1 output");
  const TensorView &x = ctx.inputs[0], &y = ctx.outputs[0];
  // int64 to float32: a mask the data holds (an attention mask), computed on as floats.
  const bool mask = x.dtype == DType::kI64 && y.dtype == DType::kF32;
  for (const TensorView* t : {&x, &y})
    if (!mask && t->dtype != DType::kF32 && !lowPrecision(t->dtype))
      return invalid(ctx,
                     "casts between float32, bfloat16 and float16, not " + dtypeName(t->dtype));
  if (x.shape != y.shape)
    return invalid(ctx, "shapes " + str(x.shape) + " and " + str(y.shape) + " differ");
  return Status::Ok();
}

// multi_tensor_cast: (x₁, …, x_N) -> (y₁, …, y_N), y_i = x_i in y_i's element type: N casts in
// one step, every x of one type and every y of one type. No y may overlap any x (the compiler
// never places them so; one step's parallel copies could not order them).
inline Status checkMultiTensorCast(const StepContext& ctx) {
  if (ctx.inputs.empty() || ctx.inputs.size() != ctx.outputs.size())
    return invalid(ctx, "expects N inputs and N outputs for N >= 1 tensors, got " +
                            std::to_string(ctx.inputs.size()) + " inputs and " +
                            std::to_string(ctx.outputs.size()) + " outputs");
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorView &x = ctx.inputs[i], &y = ctx.outputs[i];
    for (const TensorView* t : {&x, &y})
      if (t->dtype != DType::kF32 && !lowPrecision(t->dtype))
        return invalid(ctx,
                       "casts between float32, bfloat16 and float16, not " + dtypeName(t->dtype));
    if (x.dtype != ctx.inputs[0].dtype || y.dtype != ctx.outputs[0].dtype)
      return invalid(ctx, "casts one element type to one other, got " + dtypeName(x.dtype) +
                              " to " + dtypeName(y.dtype) + " beside " +
                              dtypeName(ctx.inputs[0].dtype) + " to " +
                              dtypeName(ctx.outputs[0].dtype));
    if (x.shape != y.shape)
      return invalid(ctx, "shapes " + str(x.shape) + " and " + str(y.shape) + " differ");
  }
  for (const TensorView& y : ctx.outputs) {
    const uint64_t yBytes = y.numElements() * dtypeSize(y.dtype);
    for (const TensorView& x : ctx.inputs) {
      const uint64_t xBytes = x.numElements() * dtypeSize(x.dtype);
      if (yBytes > 0 && xBytes > 0 && x.data < y.data + yBytes && y.data < x.data + xBytes)
        return invalid(ctx, "an output overlaps an input");
    }
  }
  return Status::Ok();
}

// sum_squares: x (float32) -> the scalar sum of its squared elements.
inline Status checkSumSquares(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  if (ctx.inputs[0].dtype != DType::kF32 || ctx.outputs[0].dtype != DType::kF32 ||
      ctx.outputs[0].numElements() != 1)
    return invalid(ctx, "sums a float32 tensor's squares into a float32 scalar");
  return Status::Ok();
}

// clip_coefficient: the sum of squares -> (norm, coefficient), scalars; returns `max_norm`.
inline StatusOr<float> checkClipCoefficient(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 2));
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (t.dtype != DType::kF32 || t.numElements() != 1)
        return invalid(ctx, "operands are float32 scalars");
  const float maxNorm = static_cast<float>(ctx.floatAttr("max_norm"));
  if (!(maxNorm >= 0)) return invalid(ctx, "max_norm must be >= 0");
  return maxNorm;
}

// The coefficient clip_grad_norm_ scales gradients by, in its float32 operations:
// min(1, max_norm / (norm + 1e-6)); 1 when only the norm is reported (max_norm 0).
inline float clipCoefficient(float norm, float maxNorm) {
  if (maxNorm == 0.0f) return 1.0f;
  const float coef = maxNorm / (norm + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

// nonfinite_count: x -> a scalar count of its NaNs and infinities.
inline Status checkNonfiniteCount(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  if (!ctx.outputs[0].shape.empty()) return invalid(ctx, "the count is a scalar");
  return Status::Ok();
}

// loss_scale_step: (scale, good steps, nonfinite count) -> (keep, 1/scale, new scale, new good
// steps), all scalars, as torch.cuda.amp.GradScaler updates them.
struct LossScaleRule {
  int64_t growthInterval = 0;
  float growth = 0, backoff = 0;
};

inline StatusOr<LossScaleRule> checkLossScaleStep(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 4));
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (!t.shape.empty()) return invalid(ctx, "operands are scalars");
  LossScaleRule r;
  r.growthInterval = ctx.intAttr("growth_interval");
  r.growth = static_cast<float>(ctx.floatAttr("growth_factor"));
  r.backoff = static_cast<float>(ctx.floatAttr("backoff_factor"));
  if (r.growthInterval < 1 || !(r.growth > 1) || !(r.backoff > 0 && r.backoff < 1))
    return invalid(ctx, "needs growth_interval >= 1, growth_factor > 1, 0 < backoff_factor < 1");
  return r;
}

// select: y = the scalar predicate ? on_true : on_false.
inline Status checkSelect(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  if (!ctx.inputs[0].shape.empty()) return invalid(ctx, "the predicate is a scalar");
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
  return sameShape(ctx, ctx.inputs[2], ctx.outputs[0]);
}

}  // namespace dtc
