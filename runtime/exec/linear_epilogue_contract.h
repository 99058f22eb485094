// The operand contract of the fused linear epilogues (linear_bias, linear_bias_gelu,
// linear_grad_input_gelu), shared by the CPU and CUDA binders so both refuse the same steps
// with the same words.
#pragma once

#include "exec/bind_util.h"
#include "exec/precision_contracts.h"

namespace dtc {

enum class LinearEpilogue { kBias, kBiasGelu, kGradInputGelu };

// The GEMM of a fused step, row-major: C [rows, n] = A [rows, k] · op(W), W [n, k] for the
// forward ops (transposed), [k, n] for the input gradient.
struct LinearEpilogueShape {
  int64_t rows = 0, n = 0, k = 0;
};

inline StatusOr<LinearEpilogueShape> checkLinearEpilogue(const StepContext& ctx,
                                                         LinearEpilogue kind) {
  const bool forward = kind != LinearEpilogue::kGradInputGelu;
  DTC_RETURN_IF_ERROR(expect(ctx, 3, kind == LinearEpilogue::kBiasGelu ? 2 : 1));
  const TensorView &a = ctx.inputs[0], &w = ctx.inputs[1], &third = ctx.inputs[2];
  if (a.dtype != w.dtype)
    return invalid(ctx, "operands must share one element type, got " + dtypeName(a.dtype) +
                            " and " + dtypeName(w.dtype));
  // The bias is f32; pre, the GELU's input, is f32 or (as torch.autocast keeps it) x's 16-bit
  // type.
  if (third.dtype != DType::kF32 && (forward || third.dtype != a.dtype || !lowPrecision(a.dtype)))
    return invalid(ctx, "expects a float32 " + std::string(forward ? "bias" : "pre"));
  // Results are f32, except that y (dx) may be x's (dy's) 16-bit type: under mixed precision
  // the compiler folds the narrowing cast that followed it into the op (the f32 result rounded
  // once), and with it pre may be of that type too. The CPU sees all of this widened to f32, the
  // CUDA binder with its 16-bit types as f32 (checking them itself).
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    const DType t = ctx.outputs[i].dtype;
    const bool narrow = t == a.dtype && lowPrecision(t) && (i == 0 || t == ctx.outputs[0].dtype);
    if (t != DType::kF32 && !narrow) return invalid(ctx, "expects float32 results");
  }
  auto mismatch = [&] {
    return invalid(ctx, "shapes " + str(a.shape) + ", " + str(w.shape) + ", " + str(third.shape) +
                            " -> " + str(ctx.outputs[0].shape) + " do not match");
  };
  if (a.shape.size() < 2 || w.shape.size() != 2) return mismatch();
  LinearEpilogueShape s;
  s.rows = 1;
  for (size_t d = 0; d + 1 < a.shape.size(); ++d) s.rows *= a.shape[d];
  // forward: y [..., N] = x [..., K] · w [N, K]ᵀ + b [N]; backward: dx [..., K] = dy [..., N] · w
  // [N, K].
  if (forward) {
    if (w.shape[1] != a.shape.back() || third.shape != Shape{w.shape[0]}) return mismatch();
    s.n = w.shape[0], s.k = w.shape[1];
  } else {
    if (w.shape[0] != a.shape.back()) return mismatch();
    s.n = w.shape[1], s.k = w.shape[0];
  }
  Shape want(a.shape.begin(), a.shape.end() - 1);
  want.push_back(s.n);
  for (const TensorView& out : ctx.outputs)
    if (out.shape != want) return mismatch();
  if (!forward && third.shape != want) return mismatch();
  return s;
}

// linear_grad_weight_bias: (dy [..., N], x [..., K]) -> (dweight [N, K], dbias [N]): the weight
// gradient Σ dyᵀ·x over the leading dimensions and the bias gradient Σ dy, in one step (what
// cuBLASLt's BGRAD epilogue sums beside the GEMM). dy and x share one type; both results are f32
// (or x's type for dweight, as linear_grad_weight's). Returns (rows, N, K).
inline StatusOr<LinearEpilogueShape> checkLinearGradWeightBias(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 2));
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  const TensorView &dw = ctx.outputs[0], &db = ctx.outputs[1];
  if (dy.shape.size() < 2 ||
      Shape(dy.shape.begin(), dy.shape.end() - 1) != Shape(x.shape.begin(), x.shape.end() - 1) ||
      dw.shape != Shape{dy.shape.back(), x.shape.back()} || db.shape != Shape{dy.shape.back()})
    return invalid(ctx, "shapes " + str(dy.shape) + ", " + str(x.shape) + " -> " + str(dw.shape) +
                            ", " + str(db.shape) + " do not match");
  LinearEpilogueShape s;
  s.rows = 1;
  for (size_t d = 0; d + 1 < dy.shape.size(); ++d) s.rows *= dy.shape[d];
  s.n = dy.shape.back(), s.k = x.shape.back();
  return s;
}

}  // namespace dtc
