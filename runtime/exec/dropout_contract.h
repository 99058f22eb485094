// The contract of dropout and its gradient, both backends': (x, rng) -> y and (dy, rng) -> dx,
// float32 tensors of one shape and the step's rng, int64 [2] = (seed, step). Attributes: `ratio`
// in [0, 1); `key`, the op's own counter; `micro_batch`, which of the step's micro-batches the
// op computes on; and where this device's block sits in the tensor the op computes on one
// device (ops/dropout_math.h): `global_shape` and the mesh axes splitting each dimension
// (`split_axes`, `split_counts` of them per dimension, major first). Without them the block is
// the whole tensor.
#pragma once

#include <string>
#include <vector>

#include "exec/bind_util.h"
#include "ops/dropout_math.h"

namespace dtc {

struct DropoutStep {
  float ratio = 0;
  uint64_t key = 0;
  int64_t elements = 0;
  dropout::Placement placement;
};

inline StatusOr<DropoutStep> checkDropout(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  const TensorView& x = ctx.inputs[0];
  DTC_RETURN_IF_ERROR(sameShape(ctx, x, ctx.outputs[0]));
  if (ctx.inputs[1].shape != Shape{2})
    return invalid(ctx, "rng must be int64 [2], got " + str(ctx.inputs[1].shape));
  DropoutStep d;
  const double ratio = ctx.floatAttr("ratio");
  if (!(ratio >= 0.0 && ratio < 1.0))
    return invalid(ctx, "ratio must lie in [0, 1), got " + std::to_string(ratio));
  d.ratio = static_cast<float>(ratio);
  d.key = static_cast<uint64_t>(ctx.intAttr("key"));
  d.elements = x.numElements();
  const Shape& local = x.shape;
  const int rank = static_cast<int>(local.size());
  if (rank > dropout::kMaxDims)
    return invalid(ctx, "more than " + std::to_string(dropout::kMaxDims) + " dimensions");
  Shape global = ctx.intsAttr("global_shape");
  if (global.empty()) global = local;
  const std::vector<int64_t> counts = ctx.intsAttr("split_counts");
  if (static_cast<int>(global.size()) != rank ||
      (!counts.empty() && static_cast<int>(counts.size()) != rank))
    return invalid(ctx, "global_shape and split_counts must have one entry per dimension");
  std::vector<int> axes;
  if (!ctx.intsAttr("split_axes").empty()) {
    if (!ctx.mesh) return invalid(ctx, "a split tensor in a plan run without a device mesh");
    DTC_ASSIGN_OR_RETURN(axes, meshAxesAttr(ctx, "split_axes"));
  }
  dropout::Placement& p = d.placement;
  p.rank = rank;
  // The element counts below stay under 2^62: global shapes are bounded by the plan's sizes.
  uint64_t globalElements = 1;
  for (int k = rank - 1; k >= 0; --k) {
    if (global[k] <= 0 || global[k] > (int64_t{1} << 40) ||
        globalElements > (uint64_t{1} << 62) / static_cast<uint64_t>(global[k]))
      return invalid(ctx, "global_shape " + str(global) + " is not a tensor's shape");
    p.globalStride[k] = static_cast<int64_t>(globalElements);
    globalElements *= static_cast<uint64_t>(global[k]);
  }
  size_t next = 0;
  for (int k = 0; k < rank; ++k) {
    p.local[k] = local[k];
    const int64_t n = counts.empty() ? 0 : counts[k];
    if (n < 0 || static_cast<uint64_t>(n) > axes.size() - next)
      return invalid(ctx, "split_counts do not match split_axes");
    const std::vector<int> dimAxes(axes.begin() + static_cast<std::ptrdiff_t>(next),
                                   axes.begin() + static_cast<std::ptrdiff_t>(next + n));
    next += static_cast<size_t>(n);
    const int64_t parts = dimAxes.empty() ? 1 : ctx.mesh->groupSize(dimAxes);
    p.offset[k] = dimAxes.empty() ? 0 : ctx.mesh->indexIn(dimAxes) * local[k];
    if (local[k] * parts != global[k])
      return invalid(ctx, "its block " + str(local) + " is not a block of " + str(global));
  }
  if (next != axes.size()) return invalid(ctx, "split_counts do not match split_axes");
  const int64_t microBatch = ctx.intAttr("micro_batch");
  if (microBatch < 0 || static_cast<uint64_t>(microBatch) > (uint64_t{1} << 62) / globalElements)
    return invalid(ctx, "micro_batch must be >= 0, got " + std::to_string(microBatch));
  p.base = static_cast<uint64_t>(microBatch) * globalElements;
  return d;
}

}  // namespace dtc
