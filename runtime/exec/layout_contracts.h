// The operand contracts of the layout ops (transpose, split, concat), shared by both backends'
// tables (cpu/cpu_layout_table.cc, cuda/cuda_layout_table.cc) so both accept the same steps and
// refuse the others with the same messages.
#pragma once

#include <vector>

#include "exec/bind_util.h"
#include "exec/core_contracts.h"

namespace dtc {

// Their shapes are checked after the operands' arity and element types
// (check*() on the CPU, f32; CUDA also moves 16-bit elements, checking their types itself).

// transpose: returns `perm`, a permutation of x's dimensions with out.shape[i] = x.shape[perm[i]].
inline StatusOr<std::vector<int64_t>> transposePerm(const StepContext& ctx) {
  const TensorView &x = ctx.inputs[0], &out = ctx.outputs[0];
  std::vector<int64_t> perm = ctx.intsAttr("perm");
  if (perm.size() != x.shape.size()) return invalid(ctx, "perm does not match the rank");
  std::vector<bool> seen(perm.size(), false);
  Shape expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)perm.size() || seen[p])
      return invalid(ctx, "perm is not a permutation");
    seen[p] = true;
    expected.push_back(x.shape[p]);
  }
  if (expected != out.shape) return invalid(ctx, "output " + str(out.shape) + " does not match");
  return perm;
}

// Float32 (16-bit after the backends widen or take it), or FP8 codes moved as bytes (a transposed
// copy made after their gather), the output in the input's type.
inline StatusOr<std::vector<int64_t>> checkTranspose(const StepContext& ctx) {
  if (ctx.inputs.size() == 1 && ctx.outputs.size() == 1 && float8(ctx.inputs[0].dtype)) {
    if (ctx.outputs[0].dtype != ctx.inputs[0].dtype)
      return invalid(ctx, "output must be the input's " + dtypeName(ctx.inputs[0].dtype));
  } else {
    DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  }
  return transposePerm(ctx);
}

// A whole cut into pieces along `axis`: each piece's extent along it (the rest of their shapes
// is the whole's).
struct PiecesLayout {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
};

// `whole` cut into `pieces` along the step's `axis` (split's `sizes`, when it has them, name the
// pieces' extents), or the error `refusal`.
inline StatusOr<PiecesLayout> piecesLayout(const StepContext& ctx, const Shape& whole,
                                           const std::vector<TensorView>& pieces,
                                           const char* refusal) {
  PiecesLayout l;
  l.axis = ctx.intAttr("axis");
  if (l.axis < 0 || l.axis >= static_cast<int64_t>(whole.size()) || pieces.empty())
    return invalid(ctx, refusal);
  int64_t total = 0;
  for (const TensorView& t : pieces) {
    if (t.shape.size() != whole.size()) return invalid(ctx, refusal);
    for (size_t d = 0; d < whole.size(); ++d)
      if (static_cast<int64_t>(d) != l.axis && t.shape[d] != whole[d]) return invalid(ctx, refusal);
    if (t.shape[l.axis] <= 0 || t.shape[l.axis] > whole[l.axis] - total)
      return invalid(ctx, refusal);
    total += t.shape[l.axis];
    l.sizes.push_back(t.shape[l.axis]);
  }
  if (total != whole[l.axis]) return invalid(ctx, refusal);
  const std::vector<int64_t> declared = ctx.intsAttr("sizes");
  if (!declared.empty() && declared != l.sizes)
    return invalid(ctx, "its sizes do not match its pieces");
  return l;
}

// split: the input cut into the outputs.
inline StatusOr<PiecesLayout> splitLayout(const StepContext& ctx) {
  return piecesLayout(ctx, ctx.inputs[0].shape, ctx.outputs, "pieces do not match the input");
}

// A split moves elements of one type: a float type, or int64 (labels sliced, as a causal LM's
// shift).
inline StatusOr<PiecesLayout> checkSplit(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.empty())
    return invalid(ctx, "expects 1 input and at least 1 output");
  const DType type = ctx.inputs[0].dtype;
  if (type != DType::kF32 && type != DType::kBF16 && type != DType::kF16 && type != DType::kI64)
    return invalid(ctx, "input 0 has dtype " + dtypeName(type) + " (a float type or int64)");
  for (const TensorView& out : ctx.outputs)
    if (out.dtype != type) return invalid(ctx, "its pieces must have its input's dtype");
  return splitLayout(ctx);
}

// concat: the inputs joined into the output.
inline StatusOr<PiecesLayout> concatLayout(const StepContext& ctx) {
  return piecesLayout(ctx, ctx.outputs[0].shape, ctx.inputs, "pieces do not match the output");
}

inline StatusOr<PiecesLayout> checkConcat(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, ctx.inputs.size(), 1));
  return concatLayout(ctx);
}

}  // namespace dtc
