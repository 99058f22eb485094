// The collectives' operand contracts, shared by the CPU and CUDA kernel tables so that both
// backends accept the same steps and refuse the others with the same messages.
#pragma once

#include <string>
#include <vector>

#include "exec/bind_util.h"

namespace dtc {

// The mesh axes a collective step runs over (its `axes` attribute), checked against the mesh.
inline StatusOr<std::vector<int>> collectiveAxes(const StepContext& ctx) {
  std::vector<int64_t> axes64 = ctx.intsAttr("axes");
  std::vector<int> axes(axes64.begin(), axes64.end());
  if (!ctx.mesh) return invalid(ctx, "a collective in a plan run without a device mesh");
  for (int a : axes)
    if (a < 0 || a >= static_cast<int>(ctx.mesh->sizes().size()))
      return invalid(ctx, "names mesh axis " + std::to_string(a) + ", the mesh has " +
                              std::to_string(ctx.mesh->sizes().size()));
  return axes;
}

inline Status floats(const StepContext& ctx) {
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (t.dtype != DType::kF32) return invalid(ctx, "collectives reduce float32 tensors only");
  return Status::Ok();
}

// Collectives that only move data take float32 or int64 tensors; an int64 element travels as
// two float32 words (copied bit for bit). Returns the words per element.
inline StatusOr<int64_t> movable(const StepContext& ctx) {
  DType t = ctx.inputs.empty() ? ctx.outputs[0].dtype : ctx.inputs[0].dtype;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list)
      if (v.dtype != t || (t != DType::kF32 && t != DType::kI64))
        return invalid(ctx, "moves float32 or int64 tensors of one dtype only");
  return t == DType::kI64 ? 2 : 1;
}

// A tensor seen as float32 words: int64 elements become pairs along the last dimension.
inline TensorView words(TensorView t, int64_t perElement) {
  if (perElement != 1) {
    if (t.shape.empty()) t.shape.push_back(1);
    t.shape.back() *= perElement;
  }
  t.dtype = DType::kF32;
  return t;
}

// Checks `out` = `in` with dimension `dim` (attribute `attr`) scaled by num/den; returns dim.
inline StatusOr<int64_t> scaledDim(const StepContext& ctx, const char* attr, const Shape& in,
                                   const Shape& out, int64_t num, int64_t den) {
  int64_t dim = ctx.intAttr(attr);
  if (dim < 0 || dim >= static_cast<int64_t>(in.size()) || in.size() != out.size())
    return invalid(ctx, std::string(attr) + " " + std::to_string(dim) + " is out of range");
  Shape want = in;
  if (want[dim] * num % den != 0)
    return invalid(ctx, "dimension " + std::to_string(dim) + " of " + str(in) +
                            " does not divide over " + std::to_string(den) + " devices");
  want[dim] = want[dim] * num / den;
  if (want != out) return invalid(ctx, "output " + str(out) + " should be " + str(want));
  return dim;
}

}  // namespace dtc
