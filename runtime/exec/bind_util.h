// Shared pieces of the kernel tables: operand contract helpers and the binder type.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "exec/executor.h"
#include "ops/shape.h"

namespace dtc {

using Binder = StatusOr<BoundStep> (*)(const StepContext&);

inline Status invalid(const StepContext& ctx, const std::string& message) {
  return Status::InvalidInput(ctx.where() + message);
}

inline std::string str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Arity and dtypes: every operand float32 unless listed in `int64Inputs`.
inline Status expect(const StepContext& ctx, size_t inputs, size_t outputs,
                     std::initializer_list<size_t> int64Inputs = {}) {
  if (ctx.inputs.size() != inputs || ctx.outputs.size() != outputs)
    return invalid(ctx, "expects " + std::to_string(inputs) + " inputs and " +
                            std::to_string(outputs) + " outputs");
  for (size_t i = 0; i < inputs; ++i) {
    bool wantI64 = std::find(int64Inputs.begin(), int64Inputs.end(), i) != int64Inputs.end();
    if (ctx.inputs[i].dtype != (wantI64 ? DType::kI64 : DType::kF32))
      return invalid(ctx,
                     "input " + std::to_string(i) + " has dtype " + dtypeName(ctx.inputs[i].dtype));
  }
  for (const TensorView& out : ctx.outputs)
    if (out.dtype != DType::kF32) return invalid(ctx, "outputs must be float32");
  return Status::Ok();
}

inline Status sameShape(const StepContext& ctx, const TensorView& a, const TensorView& b) {
  if (a.shape != b.shape)
    return invalid(ctx, "shapes " + str(a.shape) + " and " + str(b.shape) + " differ");
  return Status::Ok();
}

inline bool broadcastShape(const Shape& a, const Shape& b, Shape& out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

// The mesh axes a step's ints attribute `name` names, each checked against `ctx.mesh` (which
// must be there) as the file's 64-bit number (2^32 must not pass as axis 0) and named once (a
// group over an axis twice would count its devices twice).
inline StatusOr<std::vector<int>> meshAxesAttr(const StepContext& ctx, const char* name) {
  const int64_t rank = static_cast<int64_t>(ctx.mesh->sizes().size());
  std::vector<int> axes;
  for (int64_t a : ctx.intsAttr(name)) {
    if (a < 0 || a >= rank)
      return invalid(
          ctx, "names mesh axis " + std::to_string(a) + ", the mesh has " + std::to_string(rank));
    if (std::find(axes.begin(), axes.end(), a) != axes.end())
      return invalid(ctx, "names mesh axis " + std::to_string(a) + " twice");
    axes.push_back(static_cast<int>(a));
  }
  return axes;
}

// (first row, rows over all devices) of this device's block of a table or class dimension
// split over the step's `vocab_axes` ((0, localRows) when not split): this device's index over
// those axes times its rows.
inline StatusOr<std::pair<int64_t, int64_t>> vocabularyBlock(const StepContext& ctx,
                                                             int64_t localRows) {
  std::pair<int64_t, int64_t> block{0, localRows};
  if (ctx.intsAttr("vocab_axes").empty()) return block;
  if (!ctx.mesh) return invalid(ctx, "a split vocabulary in a plan run without a device mesh");
  DTC_ASSIGN_OR_RETURN(std::vector<int> axes, meshAxesAttr(ctx, "vocab_axes"));
  block.first = ctx.mesh->indexIn(axes) * localRows;
  block.second = ctx.mesh->groupSize(axes) * localRows;
  return block;
}

}  // namespace dtc
