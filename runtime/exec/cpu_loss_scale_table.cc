// Dynamic loss scaling's steps (fp16 training), as torch.cuda.amp.GradScaler computes them.
#include <cmath>
#include <cstring>

#include "exec/bind_util.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindNonfiniteCount(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  if (!ctx.outputs[0].shape.empty()) return invalid(ctx, "the count is a scalar");
  TensorView x = ctx.inputs[0], count = ctx.outputs[0];
  return BoundStep([=] {
    int64_t n = 0;
    const float* v = x.f32();
    for (int64_t i = 0; i < x.numElements(); ++i) n += !std::isfinite(v[i]);
    *count.f32() = static_cast<float>(n);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindLossScaleStep(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 4));
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (!t.shape.empty()) return invalid(ctx, "operands are scalars");
  const int64_t interval = ctx.intAttr("growth_interval");
  const float growth = static_cast<float>(ctx.floatAttr("growth_factor"));
  const float backoff = static_cast<float>(ctx.floatAttr("backoff_factor"));
  if (interval < 1 || !(growth > 1) || !(backoff > 0 && backoff < 1))
    return invalid(ctx, "needs growth_interval >= 1, growth_factor > 1, 0 < backoff_factor < 1");
  TensorView scale = ctx.inputs[0], good = ctx.inputs[1], nonfinite = ctx.inputs[2];
  TensorView keep = ctx.outputs[0], inv = ctx.outputs[1], newScale = ctx.outputs[2],
             newGood = ctx.outputs[3];
  return BoundStep([=] {
    const float s = *scale.f32();
    const bool overflow = *nonfinite.f32() > 0;
    // The inverse in f32, as GradScaler's unscale_ (grad * (1/scale)).
    *inv.f32() = 1.0f / s;
    *keep.f32() = overflow ? 0.0f : 1.0f;
    if (overflow) {
      *newScale.f32() = s * backoff;
      *newGood.f32() = 0.0f;
    } else if (*good.f32() + 1 >= static_cast<float>(interval)) {
      *newScale.f32() = s * growth;
      *newGood.f32() = 0.0f;
    } else {
      *newScale.f32() = s;
      *newGood.f32() = *good.f32() + 1;
    }
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSelect(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  if (!ctx.inputs[0].shape.empty()) return invalid(ctx, "the predicate is a scalar");
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[2], ctx.outputs[0]));
  TensorView pred = ctx.inputs[0], onTrue = ctx.inputs[1], onFalse = ctx.inputs[2], y = ctx.outputs[0];
  return BoundStep([=] {
    const TensorView& from = *pred.f32() != 0 ? onTrue : onFalse;
    if (from.data != y.data) std::memmove(y.data, from.data, y.numElements() * sizeof(float));
    return Status::Ok();
  });
}

}  // namespace

const BinderTable& lossScaleBinders() {
  static const BinderTable table = {
      {"nonfinite_count", bindNonfiniteCount},
      {"loss_scale_step", bindLossScaleStep},
      {"select", bindSelect},
  };
  return table;
}

}  // namespace dtc
