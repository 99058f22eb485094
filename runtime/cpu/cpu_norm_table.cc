// Bindings of LayerNorm, its gradient and the forms with the residual add fused, with the
// contracts of exec/norm_contracts.h. RMSNorm's are with its loops (kernels/rms_norm.cc).
#include <algorithm>
#include <vector>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/transformer_kernels.h"
#include "exec/norm_contracts.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindLayerNorm(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkLayerNorm(ctx));
  TensorView x = ctx.inputs[0], w = ctx.inputs[1], b = ctx.inputs[2];
  TensorView y = ctx.outputs[0], mean = ctx.outputs[1], rstd = ctx.outputs[2];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::layerNorm(x.f32(), w.f32(), b.f32(), y.f32(), mean.f32(), rstd.f32(), d.rows, d.c, d.eps,
                   *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindLayerNormGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkLayerNormGrad(ctx));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], w = ctx.inputs[2];
  TensorView mean = ctx.inputs[3], rstd = ctx.inputs[4];
  TensorView dx = ctx.outputs[0], dw = ctx.outputs[1], db = ctx.outputs[2];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::layerNormGrad(dy.f32(), x.f32(), w.f32(), mean.f32(), rstd.f32(), dx.f32(), dw.f32(),
                       db.f32(), d.rows, d.c, *pool);
    return Status::Ok();
  });
}

// The residual add as add computes it, then layer_norm of the sum: the unfused steps' bits.
StatusOr<BoundStep> bindAddLayerNorm(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkAddLayerNorm(ctx));
  TensorView x = ctx.inputs[0], r = ctx.inputs[1], w = ctx.inputs[2], b = ctx.inputs[3];
  TensorView sum = ctx.outputs[0], y = ctx.outputs[1], mean = ctx.outputs[2], rstd = ctx.outputs[3];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::binary(cpu::BinaryOp::kAdd, x.f32(), x.shape, r.f32(), r.shape, sum.f32(), sum.shape,
                *pool);
    cpu::layerNorm(sum.f32(), w.f32(), b.f32(), y.f32(), mean.f32(), rstd.f32(), d.rows, d.c, d.eps,
                   *pool);
    return Status::Ok();
  });
}

// layer_norm_grad into the sum's buffer, then the residual gradient added to it as add adds
// (a sum of two floats, whichever order): the unfused steps' bits. The rounded copy, when asked
// for, is the sum (bindWidened rounds it).
StatusOr<BoundStep> bindLayerNormGradAdd(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkLayerNormGradAdd(ctx));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], w = ctx.inputs[2];
  TensorView mean = ctx.inputs[3], rstd = ctx.inputs[4], dres = ctx.inputs[5];
  TensorView sum = ctx.outputs[0], dw = ctx.outputs[1], db = ctx.outputs[2];
  const bool copy = ctx.outputs.size() == 4;
  TensorView rounded = copy ? ctx.outputs[3] : sum;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::layerNormGrad(dy.f32(), x.f32(), w.f32(), mean.f32(), rstd.f32(), sum.f32(), dw.f32(),
                       db.f32(), d.rows, d.c, *pool);
    cpu::binary(cpu::BinaryOp::kAdd, dres.f32(), dres.shape, sum.f32(), sum.shape, sum.f32(),
                sum.shape, *pool);
    if (copy) std::copy(sum.f32(), sum.f32() + sum.numElements(), rounded.f32());
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(layer_norm, bindLayerNorm)
DTC_CPU_BINDER(layer_norm_grad, bindLayerNormGrad)
DTC_CPU_BINDER(add_layer_norm, bindAddLayerNorm)
DTC_CPU_BINDER(layer_norm_grad_add, bindLayerNormGradAdd)

}  // namespace dtc
