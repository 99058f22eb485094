// The operand contracts of the core ops (cpu/cpu_kernel_table.cc: GEMMs, element-wise ops,
// reductions, reshape, fill; cpu/cpu_optimizer_table.cc: the updates), shared by the CPU and CUDA
// kernel tables so both backends accept the same steps and refuse the others with the same
// messages. Each check returns what a launch needs; a backend's own limits are checked by its
// binder after the contract.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "exec/bind_util.h"

namespace dtc {

// One GEMM, row-major: C [m, n] = op(A) [m, k] · op(B) [k, n], op(X) = X or Xᵀ.
struct GemmDims {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
};

// The refusal of contraction operands whose shapes do not fit together.
inline Status gemmMismatch(const StepContext& ctx) {
  return invalid(ctx, "shapes " + str(ctx.inputs[0].shape) + ", " + str(ctx.inputs[1].shape) +
                          " -> " + str(ctx.outputs[0].shape) + " do not match");
}

// The GEMM over the last two dimensions of operands of one rank >= 2 (checked by the caller),
// with `transpose_lhs` and `transpose_rhs`.
inline StatusOr<GemmDims> trailingGemm(const StepContext& ctx) {
  const Shape &a = ctx.inputs[0].shape, &b = ctx.inputs[1].shape, &c = ctx.outputs[0].shape;
  const size_t r = a.size();
  GemmDims g;
  g.transA = ctx.intAttr("transpose_lhs") != 0, g.transB = ctx.intAttr("transpose_rhs") != 0;
  g.m = g.transA ? a[r - 1] : a[r - 2], g.k = g.transA ? a[r - 2] : a[r - 1];
  const int64_t kb = g.transB ? b[r - 1] : b[r - 2];
  g.n = g.transB ? b[r - 2] : b[r - 1];
  if (g.k != kb || c[r - 2] != g.m || c[r - 1] != g.n) return gemmMismatch(ctx);
  return g;
}

// matmul's shapes: 2-D operands with `transpose_lhs` / `transpose_rhs`. The operands' arity and
// element types are checked first (checkMatmul on the CPU; CUDA's contractionTypes also takes
// 16-bit operands).
inline StatusOr<GemmDims> matmulDims(const StepContext& ctx) {
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  if (a.shape.size() != 2 || b.shape.size() != 2 || c.shape.size() != 2)
    return invalid(ctx, "operands must be 2-D");
  return trailingGemm(ctx);
}

inline StatusOr<GemmDims> checkMatmul(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  return matmulDims(ctx);
}

// linear, linear_grad_input, linear_grad_weight: one GEMM on the leading dimensions flattened.
enum class LinearKind { kForward, kGradInput, kGradWeight };

// Their shapes, the operands' arity and element types checked first (as for matmulDims).
inline StatusOr<GemmDims> linearDims(const StepContext& ctx, LinearKind kind) {
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  if (a.shape.size() < 2 || b.shape.size() < 2) return gemmMismatch(ctx);
  Shape lead(a.shape.begin(), a.shape.end() - 1);
  int64_t rows = 1;
  for (int64_t d : lead) rows *= d;
  GemmDims g;
  Shape want;
  if (kind == LinearKind::kForward) {  // y[..., N] = x[..., K] · w[N, K]ᵀ
    if (b.shape.size() != 2 || b.shape[1] != a.shape.back()) return gemmMismatch(ctx);
    g.m = rows, g.n = b.shape[0], g.k = b.shape[1], g.transB = true;
    want = lead, want.push_back(g.n);
  } else if (kind == LinearKind::kGradInput) {  // dx[..., K] = dy[..., N] · w[N, K]
    if (b.shape.size() != 2 || b.shape[0] != a.shape.back()) return gemmMismatch(ctx);
    g.m = rows, g.n = b.shape[1], g.k = b.shape[0];
    want = lead, want.push_back(g.n);
  } else {  // dw[N, K] = Σ dy[..., N]ᵀ · x[..., K]
    if (Shape(b.shape.begin(), b.shape.end() - 1) != lead) return gemmMismatch(ctx);
    g.m = a.shape.back(), g.n = b.shape.back(), g.k = rows, g.transA = true;
    want = {g.m, g.n};
  }
  if (c.shape != want) return gemmMismatch(ctx);
  return g;
}

inline StatusOr<GemmDims> checkLinear(const StepContext& ctx, LinearKind kind) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  return linearDims(ctx, kind);
}

// add, sub, mul: out = a op b, NumPy broadcasting.
inline Status checkBinary(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  Shape expected;
  if (!broadcastShape(ctx.inputs[0].shape, ctx.inputs[1].shape, expected) ||
      expected != ctx.outputs[0].shape)
    return invalid(ctx, "cannot broadcast " + str(ctx.inputs[0].shape) + " and " +
                            str(ctx.inputs[1].shape) + " to " + str(ctx.outputs[0].shape));
  return Status::Ok();
}

// broadcast: x repeated to the output's shape.
inline Status checkBroadcast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  const TensorView &x = ctx.inputs[0], &out = ctx.outputs[0];
  Shape expected;
  if (!broadcastShape(x.shape, out.shape, expected) || expected != out.shape)
    return invalid(ctx, "cannot broadcast " + str(x.shape) + " to " + str(out.shape));
  return Status::Ok();
}

// reduce_sum: returns its `axes` (sorted, unique, within x's rank).
inline StatusOr<std::vector<int64_t>> checkReduceSum(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  const TensorView &x = ctx.inputs[0], &out = ctx.outputs[0];
  std::vector<int64_t> axes = ctx.intsAttr("axes");
  int64_t kept = 1;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= (int64_t)x.shape.size() || (i && axes[i] <= axes[i - 1]))
      return invalid(ctx, "bad axes for shape " + str(x.shape));
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), (int64_t)d) == axes.end()) kept *= x.shape[d];
  if (kept != out.numElements())
    return invalid(ctx, "output " + str(out.shape) + " does not match");
  return axes;
}

// reshape, of any element type (labels are reshaped too): returns the bytes it moves.
inline StatusOr<size_t> checkReshape(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 1 input and 1 output");
  const TensorView &x = ctx.inputs[0], &out = ctx.outputs[0];
  if (x.numElements() != out.numElements() || x.dtype != out.dtype)
    return invalid(ctx, "cannot reshape " + str(x.shape) + " to " + str(out.shape));
  return static_cast<size_t>(x.numElements()) * dtypeSize(x.dtype);
}

// fill: returns its `value`.
inline StatusOr<float> checkFill(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 0, 1));
  return static_cast<float>(ctx.floatAttr("value"));
}

// Unary element-wise ops (relu, tanh, gelu): y = f(x).
inline Status checkUnary(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  return sameShape(ctx, ctx.inputs[0], ctx.outputs[0]);
}

// Activation gradients (relu_grad, tanh_grad, gelu_grad): dx = g(dy, at).
inline Status checkActivationGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  return sameShape(ctx, ctx.inputs[0], ctx.outputs[0]);
}

// gelu, gelu_grad: the tanh approximation (`approximate_tanh`) rather than erf.
inline bool geluTanh(const StepContext& ctx) { return ctx.intAttr("approximate_tanh") != 0; }

// sgd_update: (p, g, buf, lr) -> (p', buf'), all of one shape but the scalar learning rate.
struct SgdParams {
  float momentum = 0, weightDecay = 0;
};

inline StatusOr<SgdParams> checkSgd(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 2));
  for (const TensorView& t : {ctx.inputs[1], ctx.inputs[2], ctx.outputs[0], ctx.outputs[1]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], t));
  if (ctx.inputs[3].numElements() != 1) return invalid(ctx, "the learning rate must be a scalar");
  SgdParams h;
  h.momentum = ctx.floatAttr("momentum");
  h.weightDecay = ctx.floatAttr("weight_decay");
  return h;
}

// adamw_update: (p, g, m, v, step, lr) -> (p', m', v'), all of one shape but the scalar step
// and learning rate.
struct AdamwParams {
  float beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
};

inline StatusOr<AdamwParams> checkAdamw(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 6, 3));
  for (const TensorView& t : {ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.outputs[0],
                              ctx.outputs[1], ctx.outputs[2]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], t));
  if (ctx.inputs[4].numElements() != 1) return invalid(ctx, "step must be a scalar");
  if (ctx.inputs[5].numElements() != 1) return invalid(ctx, "the learning rate must be a scalar");
  AdamwParams h;
  h.beta1 = ctx.floatAttr("beta1"), h.beta2 = ctx.floatAttr("beta2");
  h.eps = ctx.floatAttr("eps"), h.weightDecay = ctx.floatAttr("weight_decay");
  return h;
}

// multi_tensor_adamw: (p₁, g₁, m₁, v₁, …, p_N, g_N, m_N, v_N, step, lr) -> (p₁', m₁', v₁', …):
// adamw_update on N tensors in one step, one parameter group (the same betas, eps and decay).
// Returns the hyper-parameters; N is inputs.size() / 4.
inline StatusOr<AdamwParams> checkMultiTensorAdamw(const StepContext& ctx) {
  const size_t tensors = ctx.inputs.size() >= 2 ? (ctx.inputs.size() - 2) / 4 : 0;
  if (tensors == 0 || ctx.inputs.size() != 4 * tensors + 2 || ctx.outputs.size() != 3 * tensors)
    return invalid(ctx, "expects 4N + 2 inputs and 3N outputs for N >= 1 tensors, got " +
                            std::to_string(ctx.inputs.size()) + " inputs and " +
                            std::to_string(ctx.outputs.size()) + " outputs");
  DTC_RETURN_IF_ERROR(expect(ctx, ctx.inputs.size(), ctx.outputs.size()));
  for (size_t t = 0; t < tensors; ++t) {
    const TensorView& p = ctx.inputs[4 * t];
    for (const TensorView* other :
         {&ctx.inputs[4 * t + 1], &ctx.inputs[4 * t + 2], &ctx.inputs[4 * t + 3],
          &ctx.outputs[3 * t], &ctx.outputs[3 * t + 1], &ctx.outputs[3 * t + 2]})
      DTC_RETURN_IF_ERROR(sameShape(ctx, p, *other));
  }
  if (ctx.inputs[4 * tensors].numElements() != 1) return invalid(ctx, "step must be a scalar");
  if (ctx.inputs[4 * tensors + 1].numElements() != 1)
    return invalid(ctx, "the learning rate must be a scalar");
  AdamwParams h;
  h.beta1 = ctx.floatAttr("beta1"), h.beta2 = ctx.floatAttr("beta2");
  h.eps = ctx.floatAttr("eps"), h.weightDecay = ctx.floatAttr("weight_decay");
  return h;
}

}  // namespace dtc
