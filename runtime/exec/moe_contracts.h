// The operand contracts of a mixture-of-experts layer (cpu/cpu_moe_table.cc): top-k routing of
// G groups of S tokens to E experts of capacity C, the dispatch of tokens into the experts'
// buffers [E, G, C, D] and the weighted combination of their outputs, with their gradients; and
// logsumexp over the last dimension (the router's z-loss). Shared by the CPU and CUDA kernel
// tables so both backends accept the same steps and refuse the others with the same messages.
// The routing plan's indices are data, checked when the steps run: a plan that does not come
// from moe_route must not make a kernel write outside its buffers.
#pragma once

#include <string>

#include "exec/bind_util.h"
#include "ops/moe_math.h"

namespace dtc {

// The kernels' shapes; width is 0 for the routing kernels, capacity for moe_route_grad.
struct MoeDims : moe::MoeShape {
  bool normalize = false;
};

// The message of a routing plan entry outside the buffers (both backends raise it); `slots`:
// the step reads the plan's slots too.
inline std::string moePlanOutsideMessage(const MoeDims& d, bool slots = true) {
  std::string m = "a routing plan names an expert outside [0, " + std::to_string(d.experts) + ")";
  return slots ? m + " or a slot outside [-1, " + std::to_string(d.capacity) + ")" : m;
}

namespace moe_detail {

inline bool isShape(const Shape& s, std::initializer_list<int64_t> dims) {
  return s == Shape(dims);
}

// The routing plan (expert, slot), both int64 [G, S, K] with K >= 1 (slot null: the experts
// alone): fills groups, tokens and topK of `d`.
inline Status planShape(const StepContext& ctx, const TensorView& expert, const TensorView* slot,
                        MoeDims& d) {
  if (expert.shape.size() != 3 || expert.shape[2] < 1)
    return invalid(ctx, "expects expert [G, S, K] (K >= 1), got " + str(expert.shape));
  if (slot && slot->shape != expert.shape)
    return invalid(ctx, "slot " + str(slot->shape) + " does not match expert " + str(expert.shape));
  d.groups = expert.shape[0];
  d.tokens = expert.shape[1];
  d.topK = expert.shape[2];
  return Status::Ok();
}

// Experts' buffers [E, G, C, D] against the plan's G: fills experts, capacity and width.
inline Status bufferShape(const StepContext& ctx, const TensorView& buffer, MoeDims& d) {
  const Shape& b = buffer.shape;
  if (b.size() != 4 || b[1] != d.groups)
    return invalid(
        ctx, "expects expert buffers [E, " + std::to_string(d.groups) + ", C, D], got " + str(b));
  d.experts = b[0];
  d.capacity = b[2];
  d.width = b[3];
  return Status::Ok();
}

// Tokens [G, S, D] of the plan's G and S and the buffers' D.
inline Status tokenShape(const StepContext& ctx, const TensorView& x, const MoeDims& d,
                         const char* what) {
  if (!isShape(x.shape, {d.groups, d.tokens, d.width}))
    return invalid(ctx, std::string(what) + " " + str(x.shape) +
                            " does not match [G, S, D] = " + str({d.groups, d.tokens, d.width}));
  return Status::Ok();
}

// A weight per choice [G, S, K].
inline Status weightShape(const StepContext& ctx, const TensorView& w, const MoeDims& d,
                          const char* what) {
  if (!isShape(w.shape, {d.groups, d.tokens, d.topK}))
    return invalid(ctx, std::string(what) + " " + str(w.shape) +
                            " does not match [G, S, K] = " + str({d.groups, d.tokens, d.topK}));
  return Status::Ok();
}

}  // namespace moe_detail

// moe_route: scores f32 [G, S, E] -> (expert i64, slot i64, weight f32 [G, S, K], load f32
// [G, S, E]); attributes top_k (1 <= K <= E), capacity (>= 1), normalize.
inline StatusOr<MoeDims> checkMoeRoute(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 4)
    return invalid(ctx, "expects 1 inputs and 4 outputs");
  const TensorView &scores = ctx.inputs[0], &expert = ctx.outputs[0], &slot = ctx.outputs[1];
  const TensorView &weight = ctx.outputs[2], &load = ctx.outputs[3];
  // expect() takes float32 outputs only; the plan's indices are int64.
  if (scores.dtype != DType::kF32 || weight.dtype != DType::kF32 || load.dtype != DType::kF32)
    return invalid(ctx, "scores, weight and load must be float32");
  if (expert.dtype != DType::kI64 || slot.dtype != DType::kI64)
    return invalid(ctx, "expert and slot must be int64");
  if (scores.shape.size() != 3)
    return invalid(ctx, "expects scores [G, S, E], got " + str(scores.shape));
  MoeDims d;
  d.groups = scores.shape[0];
  d.tokens = scores.shape[1];
  d.experts = scores.shape[2];
  d.topK = ctx.intAttr("top_k");
  d.capacity = ctx.intAttr("capacity");
  d.normalize = ctx.intAttr("normalize") != 0;
  if (d.topK < 1 || d.topK > d.experts)
    return invalid(ctx, "top_k " + std::to_string(d.topK) + " is outside [1, " +
                            std::to_string(d.experts) + "]");
  if (d.capacity < 1)
    return invalid(ctx, "capacity " + std::to_string(d.capacity) + " must be >= 1");
  const Shape choices{d.groups, d.tokens, d.topK};
  if (expert.shape != choices || slot.shape != choices || weight.shape != choices)
    return invalid(ctx, "expert, slot and weight must be [G, S, K] = " + str(choices));
  if (load.shape != scores.shape)
    return invalid(ctx, "load " + str(load.shape) + " does not match scores " + str(scores.shape));
  return d;
}

// moe_route_grad: (dweight [G, S, K], scores [G, S, E], expert i64 [G, S, K]) -> dscores
// [G, S, E]; attribute normalize.
inline StatusOr<MoeDims> checkMoeRouteGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1, {2}));
  const TensorView &dweight = ctx.inputs[0], &scores = ctx.inputs[1], &expert = ctx.inputs[2];
  MoeDims d;
  DTC_RETURN_IF_ERROR(moe_detail::planShape(ctx, expert, nullptr, d));
  if (scores.shape.size() != 3 || scores.shape[0] != d.groups || scores.shape[1] != d.tokens)
    return invalid(ctx,
                   "scores " + str(scores.shape) + " do not match the plan " + str(expert.shape));
  d.experts = scores.shape[2];
  d.normalize = ctx.intAttr("normalize") != 0;
  DTC_RETURN_IF_ERROR(moe_detail::weightShape(ctx, dweight, d, "dweight"));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.outputs[0], scores));
  return d;
}

// moe_dispatch: (x [G, S, D], expert, slot) -> buffer [E, G, C, D].
inline StatusOr<MoeDims> checkMoeDispatch(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1, {1, 2}));
  MoeDims d;
  DTC_RETURN_IF_ERROR(moe_detail::planShape(ctx, ctx.inputs[1], &ctx.inputs[2], d));
  DTC_RETURN_IF_ERROR(moe_detail::bufferShape(ctx, ctx.outputs[0], d));
  DTC_RETURN_IF_ERROR(moe_detail::tokenShape(ctx, ctx.inputs[0], d, "x"));
  return d;
}

// moe_dispatch_grad: (dbuffer [E, G, C, D], expert, slot) -> dx [G, S, D].
inline StatusOr<MoeDims> checkMoeDispatchGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1, {1, 2}));
  MoeDims d;
  DTC_RETURN_IF_ERROR(moe_detail::planShape(ctx, ctx.inputs[1], &ctx.inputs[2], d));
  DTC_RETURN_IF_ERROR(moe_detail::bufferShape(ctx, ctx.inputs[0], d));
  DTC_RETURN_IF_ERROR(moe_detail::tokenShape(ctx, ctx.outputs[0], d, "dx"));
  return d;
}

// moe_combine: (buffer [E, G, C, D], expert, slot, weight [G, S, K]) -> y [G, S, D].
inline StatusOr<MoeDims> checkMoeCombine(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 1, {1, 2}));
  MoeDims d;
  DTC_RETURN_IF_ERROR(moe_detail::planShape(ctx, ctx.inputs[1], &ctx.inputs[2], d));
  DTC_RETURN_IF_ERROR(moe_detail::bufferShape(ctx, ctx.inputs[0], d));
  DTC_RETURN_IF_ERROR(moe_detail::weightShape(ctx, ctx.inputs[3], d, "weight"));
  DTC_RETURN_IF_ERROR(moe_detail::tokenShape(ctx, ctx.outputs[0], d, "y"));
  return d;
}

// moe_combine_grad: (dy [G, S, D], buffer, expert, slot, weight) -> (dbuffer [E, G, C, D],
// dweight [G, S, K]).
inline StatusOr<MoeDims> checkMoeCombineGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 2, {2, 3}));
  MoeDims d;
  DTC_RETURN_IF_ERROR(moe_detail::planShape(ctx, ctx.inputs[2], &ctx.inputs[3], d));
  DTC_RETURN_IF_ERROR(moe_detail::bufferShape(ctx, ctx.inputs[1], d));
  DTC_RETURN_IF_ERROR(moe_detail::tokenShape(ctx, ctx.inputs[0], d, "dy"));
  DTC_RETURN_IF_ERROR(moe_detail::weightShape(ctx, ctx.inputs[4], d, "weight"));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.outputs[0], ctx.inputs[1]));
  DTC_RETURN_IF_ERROR(moe_detail::weightShape(ctx, ctx.outputs[1], d, "dweight"));
  return d;
}

// ---- logsumexp over the last dimension: x [..., N] -> y [...].

struct LogSumExpDims {
  int64_t rows = 0, n = 0;
};

inline StatusOr<LogSumExpDims> logSumExpRows(const StepContext& ctx, const TensorView& x,
                                             const TensorView& y) {
  if (x.shape.empty() || Shape(x.shape.begin(), x.shape.end() - 1) != y.shape)
    return invalid(ctx,
                   "expects x [..., N] and y [...], got " + str(x.shape) + " and " + str(y.shape));
  return LogSumExpDims{y.numElements(), x.shape.back()};
}

// logsumexp: x -> y.
inline StatusOr<LogSumExpDims> checkLogSumExp(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  return logSumExpRows(ctx, ctx.inputs[0], ctx.outputs[0]);
}

// logsumexp_grad: (dy [...], x [..., N], y [...]) -> dx [..., N].
inline StatusOr<LogSumExpDims> checkLogSumExpGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[2]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.outputs[0], ctx.inputs[1]));
  return logSumExpRows(ctx, ctx.inputs[1], ctx.inputs[2]);
}

}  // namespace dtc
