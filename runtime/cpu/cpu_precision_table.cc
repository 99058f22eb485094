// The CPU backend's mixed-precision steps: casts between f32 and the 16-bit types (one tensor,
// or many in one step), and the checks on a step's gradients before its updates: dynamic loss
// scaling (fp16 training), as torch.cuda.amp.GradScaler computes it, and the global norm of
// gradient clipping, as torch.nn.utils.clip_grad_norm_; with the contracts of
// exec/precision_contracts.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/cpu_binders.h"
#include "exec/precision_contracts.h"

namespace dtc {
namespace {

// y = x in y's element type; between two 16-bit types through f32 (exact).
void castInto(const TensorView& x, const TensorView& y) {
  if (x.dtype == y.dtype) {
    std::memmove(y.data, x.data, x.numElements() * dtypeSize(x.dtype));
  } else if (x.dtype == DType::kI64) {
    const int64_t* from = reinterpret_cast<const int64_t*>(x.data);
    float* to = y.f32();
    for (int64_t i = 0; i < x.numElements(); ++i) to[i] = static_cast<float>(from[i]);
  } else if (x.dtype == DType::kF32) {
    fromF32(x.f32(), y);
  } else if (y.dtype == DType::kF32) {
    toF32(x, y.f32());
  } else {
    std::vector<float> wide(x.numElements());
    toF32(x, wide.data());
    fromF32(wide.data(), y);
  }
}

StatusOr<BoundStep> bindCast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkCast(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  return BoundStep([=] {
    castInto(x, y);
    return Status::Ok();
  });
}

// Each pair as cast computes it.
StatusOr<BoundStep> bindMultiTensorCast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkMultiTensorCast(ctx));
  std::vector<TensorView> xs(ctx.inputs.begin(), ctx.inputs.end());
  std::vector<TensorView> ys(ctx.outputs.begin(), ctx.outputs.end());
  return BoundStep([=] {
    for (size_t i = 0; i < xs.size(); ++i) castInto(xs[i], ys[i]);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindNonfiniteCount(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkNonfiniteCount(ctx));
  TensorView x = ctx.inputs[0], count = ctx.outputs[0];
  return BoundStep([=] {
    int64_t n = 0;
    const float* v = x.f32();
    for (int64_t i = 0; i < x.numElements(); ++i) n += !std::isfinite(v[i]);
    *count.f32() = static_cast<float>(n);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSumSquares(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkSumSquares(ctx));
  TensorView x = ctx.inputs[0], sum = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    // Per fixed block in double, blocks summed in order: the same result on any thread count.
    constexpr int64_t kBlock = 1 << 16;
    const int64_t n = x.numElements(), blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> partial(blocks);
    const float* v = x.f32();
    pool->parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        double s = 0;
        for (int64_t i = b * kBlock, e = std::min(n, i + kBlock); i < e; ++i)
          s += double(v[i]) * v[i];
        partial[b] = s;
      }
    });
    double total = 0;
    for (double s : partial) total += s;
    *sum.f32() = static_cast<float>(total);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindClipCoefficient(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const float maxNorm, checkClipCoefficient(ctx));
  TensorView squares = ctx.inputs[0], norm = ctx.outputs[0], coef = ctx.outputs[1];
  return BoundStep([=] {
    const float n = std::sqrt(*squares.f32());
    *norm.f32() = n;
    *coef.f32() = clipCoefficient(n, maxNorm);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindLossScaleStep(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LossScaleRule rule, checkLossScaleStep(ctx));
  const int64_t interval = rule.growthInterval;
  const float growth = rule.growth, backoff = rule.backoff;
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
  DTC_RETURN_IF_ERROR(checkSelect(ctx));
  TensorView pred = ctx.inputs[0], onTrue = ctx.inputs[1], onFalse = ctx.inputs[2],
             y = ctx.outputs[0];
  return BoundStep([=] {
    const TensorView& from = *pred.f32() != 0 ? onTrue : onFalse;
    if (from.data != y.data) std::memmove(y.data, from.data, y.numElements() * sizeof(float));
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(cast, bindCast)
DTC_CPU_BINDER(multi_tensor_cast, bindMultiTensorCast)
DTC_CPU_BINDER(nonfinite_count, bindNonfiniteCount)
DTC_CPU_BINDER(loss_scale_step, bindLossScaleStep)
DTC_CPU_BINDER(select, bindSelect)
DTC_CPU_BINDER(sum_squares, bindSumSquares)
DTC_CPU_BINDER(clip_coefficient, bindClipCoefficient)

}  // namespace dtc
