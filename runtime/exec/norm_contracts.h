// The operand contracts of the normalisations over the last dimension (LayerNorm, RMSNorm, their
// gradients, and the forms with the residual add fused), shared by the CPU and CUDA kernel tables
// (cpu/cpu_norm_table.cc, cuda/cuda_norm_table.cc) so both backends accept the same steps and
// refuse the others with the same messages.
#pragma once

#include <string>

#include "exec/bind_util.h"
#include "exec/core_contracts.h"
#include "ops/norm_parts.h"

namespace dtc {

// ---- LayerNorm over the last dimension: x [rows..., C] with per-row statistics [rows...].

struct LayerNormDims {
  int64_t rows = 0, c = 0;
  float eps = 0;
};

// x [..., C] with weight [C] and statistics [...]: returns C, or 0 if the shapes disagree.
inline int64_t layerNormWidth(const TensorView& x, const TensorView& w, const TensorView& mean) {
  if (x.shape.empty() || w.shape != Shape{x.shape.back()} ||
      mean.shape != Shape(x.shape.begin(), x.shape.end() - 1))
    return 0;
  return x.shape.back();
}

// layer_norm: (x, weight, bias) -> (y, mean, rstd), all float32 (CUDA checks a 16-bit y as f32).
inline StatusOr<LayerNormDims> checkLayerNorm(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 3));
  const TensorView &x = ctx.inputs[0], &w = ctx.inputs[1], &b = ctx.inputs[2];
  const TensorView &y = ctx.outputs[0], &mean = ctx.outputs[1], &rstd = ctx.outputs[2];
  int64_t c = layerNormWidth(x, w, mean);
  if (c == 0 || b.shape != w.shape || y.shape != x.shape || rstd.shape != mean.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  return LayerNormDims{mean.numElements(), c, static_cast<float>(ctx.floatAttr("eps"))};
}

// layer_norm_grad: (dy, x, weight, mean, rstd) -> (dx, dweight, dbias).
inline StatusOr<LayerNormDims> checkLayerNormGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1], &w = ctx.inputs[2];
  const TensorView &mean = ctx.inputs[3], &rstd = ctx.inputs[4];
  const TensorView &dx = ctx.outputs[0], &dw = ctx.outputs[1], &db = ctx.outputs[2];
  int64_t c = layerNormWidth(x, w, mean);
  if (c == 0 || dy.shape != x.shape || dx.shape != x.shape || rstd.shape != mean.shape ||
      dw.shape != w.shape || db.shape != w.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  return LayerNormDims{mean.numElements(), c, 0.0f};
}

// add_layer_norm: (x, r, weight, bias) -> (sum, y, mean, rstd): sum = x + r (the residual
// stream), then layer_norm of it; every operand float32 (CUDA checks a 16-bit y as f32).
inline StatusOr<LayerNormDims> checkAddLayerNorm(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 4));
  const TensorView &x = ctx.inputs[0], &r = ctx.inputs[1], &sum = ctx.outputs[0];
  if (r.shape != x.shape || sum.shape != x.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  StepContext norm{ctx.step,
                   {sum, ctx.inputs[2], ctx.inputs[3]},
                   {ctx.outputs[1], ctx.outputs[2], ctx.outputs[3]},
                   ctx.pool,
                   ctx.mesh};
  return checkLayerNorm(norm);
}

// layer_norm_grad_add: (dy, x, weight, mean, rstd, dres) -> (dres + dx, dweight, dbias[, the
// sum rounded]): layer_norm_grad with the residual stream's gradient added to dx; a fourth
// output, of a 16-bit type, is the sum rounded to it (what the next GEMMs read).
inline StatusOr<LayerNormDims> checkLayerNormGradAdd(const StepContext& ctx) {
  if (ctx.outputs.size() != 3 && ctx.outputs.size() != 4)
    return invalid(ctx, "expects 6 inputs and 3 or 4 outputs");
  DTC_RETURN_IF_ERROR(expect(ctx, 6, ctx.outputs.size()));
  const TensorView &x = ctx.inputs[1], &dres = ctx.inputs[5];
  if (dres.shape != x.shape || (ctx.outputs.size() == 4 && ctx.outputs[3].shape != x.shape))
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  StepContext grad{ctx.step,
                   {ctx.inputs[0], x, ctx.inputs[2], ctx.inputs[3], ctx.inputs[4]},
                   {ctx.outputs[0], ctx.outputs[1], ctx.outputs[2]},
                   ctx.pool,
                   ctx.mesh};
  return checkLayerNormGrad(grad);
}

// ---- RMSNorm over the last dimension (LlamaRMSNorm).

// rms_norm: (x, weight) -> (y, rstd): x [rows..., C], weight [C], rstd [rows...]; float32.
inline StatusOr<LayerNormDims> checkRmsNorm(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 2));
  const TensorView &x = ctx.inputs[0], &w = ctx.inputs[1];
  const TensorView &y = ctx.outputs[0], &rstd = ctx.outputs[1];
  const int64_t c = layerNormWidth(x, w, rstd);
  if (c == 0 || y.shape != x.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  const float eps = static_cast<float>(ctx.floatAttr("eps"));
  if (!(eps > 0)) return invalid(ctx, "eps must be > 0");
  return LayerNormDims{rstd.numElements(), c, eps};
}

// rms_norm_grad: (dy, x, weight, rstd) -> (dx, dweight).
inline StatusOr<LayerNormDims> checkRmsNormGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 2));
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1], &w = ctx.inputs[2];
  const TensorView &rstd = ctx.inputs[3], &dx = ctx.outputs[0], &dw = ctx.outputs[1];
  const int64_t c = layerNormWidth(x, w, rstd);
  if (c == 0 || dy.shape != x.shape || dx.shape != x.shape || dw.shape != w.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  return LayerNormDims{rstd.numElements(), c, 0.0f};
}

// add_rms_norm: (x, r, weight) -> (sum, y, rstd): sum = x + r (the residual stream), then
// rms_norm of it.
inline StatusOr<LayerNormDims> checkAddRmsNorm(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 3));
  const TensorView &x = ctx.inputs[0], &r = ctx.inputs[1], &sum = ctx.outputs[0];
  if (r.shape != x.shape || sum.shape != x.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  StepContext norm{
      ctx.step, {sum, ctx.inputs[2]}, {ctx.outputs[1], ctx.outputs[2]}, ctx.pool, ctx.mesh};
  return checkRmsNorm(norm);
}

// rms_norm_grad_add: (dy₁, …, dyₚ, x, weight, rstd, dres) -> (dres + dx, dweight[, the sum
// rounded]): rms_norm_grad of dy = ((dy₁ + dy₂) + …) + dyₚ, summed in that order, with the
// residual stream's gradient added to dx; a third output, of a 16-bit type, is the sum rounded to
// it (what the next GEMMs read). 1 ≤ p ≤ kRmsNormGradParts, every part of x's shape.
inline StatusOr<LayerNormDims> checkRmsNormGradAdd(const StepContext& ctx) {
  const size_t inputs = ctx.inputs.size(), outputs = ctx.outputs.size();
  if (inputs < 5 || inputs > 4 + kRmsNormGradParts || (outputs != 2 && outputs != 3))
    return invalid(ctx, "expects 5 to " + std::to_string(4 + kRmsNormGradParts) +
                            " inputs and 2 or 3 outputs");
  DTC_RETURN_IF_ERROR(expect(ctx, inputs, outputs));
  const size_t parts = inputs - 4;
  const TensorView &x = ctx.inputs[parts], &dres = ctx.inputs[inputs - 1];
  for (size_t i = 1; i < parts; ++i)
    if (ctx.inputs[i].shape != x.shape)
      return invalid(ctx, "shapes do not match input " + str(x.shape));
  if (dres.shape != x.shape || (outputs == 3 && ctx.outputs[2].shape != x.shape))
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  StepContext grad{ctx.step,
                   {ctx.inputs[0], x, ctx.inputs[parts + 1], ctx.inputs[parts + 2]},
                   {ctx.outputs[0], ctx.outputs[1]},
                   ctx.pool,
                   ctx.mesh};
  return checkRmsNormGrad(grad);
}

}  // namespace dtc
