// The operand contracts of the convolutional ops (cpu/cpu_conv_table.cc: conv2d and its
// gradients, max pooling, BatchNorm in its fused and synchronised forms), shared by the CPU and
// CUDA kernel tables so both backends accept the same steps and refuse the others with the same
// messages. Each check returns the geometry a launch needs.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "exec/bind_util.h"

namespace dtc {

// A conv2d: input [N, C, H, W], weight [O, C, kh, kw], output [N, O, oh, ow].
struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t o = 0, kh = 0, kw = 0;
  int64_t sh = 0, sw = 0, ph = 0, pw = 0;  // stride, zero padding
  int64_t oh = 0, ow = 0;
};

// Geometry of a conv2d from its input, weight and attributes, checked against `y`'s shape.
inline StatusOr<ConvShape> convGeometry(const StepContext& ctx, const Shape& x, const Shape& w,
                                        const Shape& y) {
  std::vector<int64_t> stride = ctx.intsAttr("stride"), padding = ctx.intsAttr("padding");
  if (x.size() != 4 || w.size() != 4 || y.size() != 4 || stride.size() != 2 ||
      padding.size() != 2 || stride[0] <= 0 || stride[1] <= 0 || padding[0] < 0 || padding[1] < 0 ||
      w[1] != x[1] || x[2] + 2 * padding[0] < w[2] || x[3] + 2 * padding[1] < w[3])
    return invalid(ctx, "bad shapes or attributes for input " + str(x) + " and weight " + str(w));
  ConvShape g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.sh = stride[0], g.sw = stride[1], g.ph = padding[0], g.pw = padding[1];
  g.oh = (g.h + 2 * g.ph - g.kh) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
  if (y != Shape{g.n, g.o, g.oh, g.ow})
    return invalid(ctx, "output " + str(y) + " does not match input " + str(x));
  return g;
}

// The three conv ops and their operands: conv2d (x, w) -> y; conv2d_grad_input (dy, w) -> dx;
// conv2d_grad_weight (dy, x) -> dw.
enum class ConvOp { kForward, kGradInput, kGradWeight };

inline StatusOr<ConvShape> checkConv2d(const StepContext& ctx, ConvOp op) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  const Shape &in0 = ctx.inputs[0].shape, &in1 = ctx.inputs[1].shape, &out = ctx.outputs[0].shape;
  const Shape& x = op == ConvOp::kForward ? in0 : op == ConvOp::kGradInput ? out : in1;
  const Shape& w = op == ConvOp::kGradWeight ? out : in1;
  const Shape& y = op == ConvOp::kForward ? out : in0;
  return convGeometry(ctx, x, w, y);
}

// A max pooling: input [N, C, H, W], windows kh × kw every sh, sw; output [N, C, oh, ow].
struct PoolShape {
  int64_t n = 0, c = 0, h = 0, w = 0, kh = 0, kw = 0, sh = 0, sw = 0;
  int64_t oh = 0, ow = 0;
};

inline StatusOr<PoolShape> poolGeometry(const StepContext& ctx, const Shape& x, const Shape& y) {
  std::vector<int64_t> kernel = ctx.intsAttr("kernel"), stride = ctx.intsAttr("stride");
  if (x.size() != 4 || kernel.size() != 2 || stride.size() != 2 || kernel[0] <= 0 ||
      kernel[1] <= 0 || stride[0] <= 0 || stride[1] <= 0 || x[2] < kernel[0] || x[3] < kernel[1])
    return invalid(ctx, "bad shape or attributes for input " + str(x));
  PoolShape g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.kh = kernel[0], g.kw = kernel[1], g.sh = stride[0], g.sw = stride[1];
  g.oh = (g.h - g.kh) / g.sh + 1;
  g.ow = (g.w - g.kw) / g.sw + 1;
  if (y != Shape{g.n, g.c, g.oh, g.ow})
    return invalid(ctx, "output " + str(y) + " does not match input " + str(x));
  return g;
}

// max_pool2d: x -> y.
inline StatusOr<PoolShape> checkMaxPool2d(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  return poolGeometry(ctx, ctx.inputs[0].shape, ctx.outputs[0].shape);
}

// max_pool2d_grad: (dy, x) -> dx.
inline StatusOr<PoolShape> checkMaxPool2dGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  DTC_RETURN_IF_ERROR(sameShape(ctx, x, ctx.outputs[0]));
  return poolGeometry(ctx, x.shape, dy.shape);
}

// ---- BatchNorm over x [N, C, H, W] seen as [N, C, S] (S = H·W), every other operand [C].

struct BatchNormDims {
  int64_t n = 0, c = 0, s = 0;
  int64_t count = 0;            // synchronised forms: the whole batch's values per channel
  float eps = 0, momentum = 0;  // the forms that normalise / update running statistics
};

// x [N, C, H, W] with every other operand [C]: checks and returns {N, C, H·W}.
inline StatusOr<BatchNormDims> normShape(const StepContext& ctx, const TensorView& x,
                                         std::initializer_list<const TensorView*> perChannel) {
  if (x.shape.size() != 4) return invalid(ctx, "needs NCHW input, got " + str(x.shape));
  for (const TensorView* t : perChannel)
    if (t->shape != Shape{x.shape[1]})
      return invalid(ctx, "per-channel tensors must be [" + std::to_string(x.shape[1]) + "]");
  BatchNormDims d;
  d.n = x.shape[0], d.c = x.shape[1], d.s = x.shape[2] * x.shape[3];
  return d;
}

// Synchronised BatchNorm pieces: `count` (the whole batch's values per channel) must cover at
// least the local ones.
inline Status syncCount(const StepContext& ctx, BatchNormDims& d) {
  int64_t count = ctx.intAttr("count");
  if (count < d.n * d.s)
    return invalid(ctx, "count " + std::to_string(count) + " is below the " +
                            std::to_string(d.n * d.s) + " values per channel it holds");
  d.count = count;
  return Status::Ok();
}

// batch_norm_train: (x, weight, bias, running mean, running var) -> (y, mean, rstd, new running
// mean, new running var).
inline StatusOr<BatchNormDims> checkBatchNormTrain(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 5));
  const auto &in = ctx.inputs, &out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], out[0]));
  DTC_ASSIGN_OR_RETURN(
      BatchNormDims d,
      normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4], &out[1], &out[2], &out[3], &out[4]}));
  d.eps = static_cast<float>(ctx.floatAttr("eps"));
  d.momentum = static_cast<float>(ctx.floatAttr("momentum"));
  return d;
}

// batch_norm_train_grad: (dy, x, weight, mean, rstd) -> (dx, dweight, dbias).
inline StatusOr<BatchNormDims> checkBatchNormTrainGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  const auto &in = ctx.inputs, &out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[1], out[0]));
  return normShape(ctx, in[1], {&in[2], &in[3], &in[4], &out[1], &out[2]});
}

// batch_norm_eval: (x, weight, bias, running mean, running var) -> y.
inline StatusOr<BatchNormDims> checkBatchNormEval(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 1));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4]}));
  d.eps = static_cast<float>(ctx.floatAttr("eps"));
  return d;
}

// batch_norm_sum: x -> per-channel sums.
inline StatusOr<BatchNormDims> checkBatchNormSum(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  return normShape(ctx, ctx.inputs[0], {&ctx.outputs[0]});
}

// batch_norm_centered_squares: (x, the whole batch's sums) -> per-channel sums of squared
// deviations.
inline StatusOr<BatchNormDims> checkBatchNormCenteredSquares(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_ASSIGN_OR_RETURN(BatchNormDims d,
                       normShape(ctx, ctx.inputs[0], {&ctx.inputs[1], &ctx.outputs[0]}));
  DTC_RETURN_IF_ERROR(syncCount(ctx, d));
  return d;
}

// batch_norm_normalize: (x, sum, squares, weight, bias, running mean, running var) -> (y, mean,
// rstd, new running mean, new running var), from the whole batch's sums.
inline StatusOr<BatchNormDims> checkBatchNormNormalize(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 7, 5));
  const auto &in = ctx.inputs, &out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], out[0]));
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, normShape(ctx, in[0],
                                                  {&in[1], &in[2], &in[3], &in[4], &in[5], &in[6],
                                                   &out[1], &out[2], &out[3], &out[4]}));
  DTC_RETURN_IF_ERROR(syncCount(ctx, d));
  d.eps = static_cast<float>(ctx.floatAttr("eps"));
  d.momentum = static_cast<float>(ctx.floatAttr("momentum"));
  return d;
}

// batch_norm_grad_sums: (dy, x, mean, rstd) -> (dbias, dweight), partial per device.
inline StatusOr<BatchNormDims> checkBatchNormGradSums(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 2));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  return normShape(ctx, in[1], {&in[2], &in[3], &ctx.outputs[0], &ctx.outputs[1]});
}

// batch_norm_grad_input: (dy, x, weight, mean, rstd, dbias, dweight) -> dx, from the whole
// batch's dbias and dweight.
inline StatusOr<BatchNormDims> checkBatchNormGradInput(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 7, 1));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[1], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(BatchNormDims d,
                       normShape(ctx, in[1], {&in[2], &in[3], &in[4], &in[5], &in[6]}));
  DTC_RETURN_IF_ERROR(syncCount(ctx, d));
  return d;
}

}  // namespace dtc
