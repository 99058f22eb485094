// LayerNorm on CUDA (cpu/cpu_norm_table.cc's): its gradient and the forms with the residual add
// fused, with the CPU's contracts (exec/norm_contracts.h). RMSNorm's binders are with its
// kernels (kernels/rms_norm.cu).
#include <array>
#include <vector>

#include "cuda_bind.h"
#include "exec/norm_contracts.h"
#include "exec/precision_contracts.h"

namespace dtc::cuda {
namespace {

// y may be bf16/f16: the f32 result rounded once (dtc-fold-casts folds the cast that fed a
// 16-bit contraction into the LayerNorm); the rest is the CPU's f32 contract.
StatusOr<BoundStep> bindLayerNorm(const StepContext& ctx, Device& dev) {
  kernels::Float yType = kernels::Float::kF32;
  StepContext f32 = ctx;
  if (ctx.outputs.size() == 3 && lowPrecision(ctx.outputs[0].dtype)) {
    yType = floatOf(ctx.outputs[0].dtype);
    f32.outputs[0].dtype = DType::kF32;
  }
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkLayerNorm(f32));
  TensorView x = ctx.inputs[0], w = ctx.inputs[1], b = ctx.inputs[2];
  TensorView y = ctx.outputs[0], mean = ctx.outputs[1], rstd = ctx.outputs[2];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::layerNorm(x.f32(), w.f32(), b.f32(), y.data, yType, mean.f32(),
                                       rstd.f32(), d.rows, d.c, d.eps, stream),
                    where);
  });
}

// dy may be bf16/f16 (a 16-bit contraction's input gradient), widened as it is read; the rest is
// the CPU's f32 contract.
StatusOr<BoundStep> bindLayerNormGrad(const StepContext& ctx, Device& dev) {
  kernels::Float dyType = kernels::Float::kF32;
  StepContext f32 = ctx;
  if (!ctx.inputs.empty() && lowPrecision(ctx.inputs[0].dtype)) {
    dyType = floatOf(ctx.inputs[0].dtype);
    f32.inputs[0].dtype = DType::kF32;
  }
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkLayerNormGrad(f32));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], w = ctx.inputs[2];
  TensorView mean = ctx.inputs[3], rstd = ctx.inputs[4];
  TensorView dx = ctx.outputs[0], dw = ctx.outputs[1], db = ctx.outputs[2];
  DTC_ASSIGN_OR_RETURN(void* scratch,
                       stepScratch(ctx, dev, kernels::layerNormGradScratchBytes(d.rows, d.c)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::layerNormGrad(dy.data, dyType, x.f32(), w.f32(), mean.f32(), rstd.f32(), dx.f32(),
                               dw.f32(), db.f32(), d.rows, d.c, scratch, stream),
        where);
  });
}

// The residual add and layer_norm of the sum in one pass; y may be bf16/f16 as layer_norm's.
StatusOr<BoundStep> bindAddLayerNorm(const StepContext& ctx, Device& dev) {
  kernels::Float yType = kernels::Float::kF32;
  StepContext f32 = ctx;
  if (ctx.outputs.size() == 4 && lowPrecision(ctx.outputs[1].dtype)) {
    yType = floatOf(ctx.outputs[1].dtype);
    f32.outputs[1].dtype = DType::kF32;
  }
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkAddLayerNorm(f32));
  TensorView x = ctx.inputs[0], r = ctx.inputs[1], w = ctx.inputs[2], b = ctx.inputs[3];
  TensorView sum = ctx.outputs[0], y = ctx.outputs[1], mean = ctx.outputs[2], rstd = ctx.outputs[3];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::layerNorm(x.f32(), w.f32(), b.f32(), y.data, yType, mean.f32(),
                                       rstd.f32(), d.rows, d.c, d.eps, stream, r.f32(), sum.f32()),
                    where);
  });
}

// layer_norm_grad with the residual gradient added to dx in the same pass, and the sum also
// rounded to a fourth output's 16-bit type when there is one; dy may be 16-bit as
// layer_norm_grad's.
StatusOr<BoundStep> bindLayerNormGradAdd(const StepContext& ctx, Device& dev) {
  kernels::Float dyType = kernels::Float::kF32;
  kernels::LayerNormGradAdd add;
  StepContext f32 = ctx;
  if (!ctx.inputs.empty() && lowPrecision(ctx.inputs[0].dtype)) {
    dyType = floatOf(ctx.inputs[0].dtype);
    f32.inputs[0].dtype = DType::kF32;
  }
  if (ctx.outputs.size() == 4) {
    if (!lowPrecision(ctx.outputs[3].dtype))
      return invalid(ctx, "the rounded sum must be bfloat16 or float16, got " +
                              dtypeName(ctx.outputs[3].dtype));
    add.roundedType = floatOf(ctx.outputs[3].dtype);
    add.rounded = ctx.outputs[3].data;
    f32.outputs[3].dtype = DType::kF32;
  }
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkLayerNormGradAdd(f32));
  add.residual = ctx.inputs[5].f32();
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], w = ctx.inputs[2];
  TensorView mean = ctx.inputs[3], rstd = ctx.inputs[4];
  TensorView sum = ctx.outputs[0], dw = ctx.outputs[1], db = ctx.outputs[2];
  DTC_ASSIGN_OR_RETURN(void* scratch,
                       stepScratch(ctx, dev, kernels::layerNormGradScratchBytes(d.rows, d.c)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::layerNormGrad(dy.data, dyType, x.f32(), w.f32(), mean.f32(), rstd.f32(), sum.f32(),
                               dw.f32(), db.f32(), d.rows, d.c, scratch, stream, add),
        where);
  });
}

}  // namespace

DTC_CUDA_BINDER(layer_norm, bindLayerNorm)
DTC_CUDA_BINDER(layer_norm_grad, bindLayerNormGrad)
DTC_CUDA_BINDER(add_layer_norm, bindAddLayerNorm)
DTC_CUDA_BINDER(layer_norm_grad_add, bindLayerNormGradAdd)

}  // namespace dtc::cuda
