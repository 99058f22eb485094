// Bindings of the convolutional ops (see cpu/kernels/conv_kernels.h), with the contracts of
// exec/conv_contracts.h.
#include "cpu/cpu_binders.h"
#include "cpu/kernels/conv_kernels.h"
#include "cpu/kernels/kernels.h"
#include "exec/conv_contracts.h"

namespace dtc {
namespace {

// The three conv kernels share one form, kernel(in0, in1, out0, geometry); they differ in which
// operand plays the input x, the weight and the output y (ConvOp).
using ConvKernel = void (*)(const float*, const float*, float*, const cpu::ConvGeometry&,
                            ThreadPool&);

template <ConvKernel Kernel, ConvOp Op>
StatusOr<BoundStep> bindConv(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(ConvShape s, checkConv2d(ctx, Op));
  cpu::ConvGeometry g{s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw};
  float *a = ctx.inputs[0].f32(), *b = ctx.inputs[1].f32(), *out = ctx.outputs[0].f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    Kernel(a, b, out, g, *pool);
    return Status::Ok();
  });
}

cpu::PoolGeometry poolOf(const PoolShape& s) {
  return {s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw};
}

StatusOr<BoundStep> bindMaxPool2d(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PoolShape s, checkMaxPool2d(ctx));
  const cpu::PoolGeometry g = poolOf(s);
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::maxPool2d(x.f32(), y.f32(), g, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMaxPool2dGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PoolShape s, checkMaxPool2dGrad(ctx));
  const cpu::PoolGeometry g = poolOf(s);
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::maxPool2dGrad(dy.f32(), x.f32(), dx.f32(), g, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormTrain(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormTrain(ctx));
  std::vector<TensorView> i = ctx.inputs, o = ctx.outputs;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormTrain(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), o[0].f32(),
                        o[1].f32(), o[2].f32(), o[3].f32(), o[4].f32(), d.n, d.c, d.s, d.eps,
                        d.momentum, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormTrainGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormTrainGrad(ctx));
  std::vector<TensorView> i = ctx.inputs, o = ctx.outputs;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormTrainGrad(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), o[0].f32(),
                            o[1].f32(), o[2].f32(), d.n, d.c, d.s, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormEval(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormEval(ctx));
  std::vector<TensorView> i = ctx.inputs;
  TensorView y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormEval(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), y.f32(), d.n,
                       d.c, d.s, d.eps, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormSum(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormSum(ctx));
  TensorView x = ctx.inputs[0], sum = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormSum(x.f32(), sum.f32(), d.n, d.c, d.s, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormCenteredSquares(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormCenteredSquares(ctx));
  TensorView x = ctx.inputs[0], sum = ctx.inputs[1], sq = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormCenteredSquares(x.f32(), sum.f32(), sq.f32(), d.n, d.c, d.s, d.count, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormNormalize(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormNormalize(ctx));
  std::vector<TensorView> i = ctx.inputs, o = ctx.outputs;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormNormalize(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), i[5].f32(),
                            i[6].f32(), o[0].f32(), o[1].f32(), o[2].f32(), o[3].f32(), o[4].f32(),
                            d.n, d.c, d.s, d.count, d.eps, d.momentum, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormGradSums(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormGradSums(ctx));
  std::vector<TensorView> i = ctx.inputs, o = ctx.outputs;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormGradSums(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), o[0].f32(), o[1].f32(),
                           d.n, d.c, d.s, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormGradInput(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BatchNormDims d, checkBatchNormGradInput(ctx));
  std::vector<TensorView> i = ctx.inputs;
  TensorView dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormGradInput(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), i[5].f32(),
                            i[6].f32(), dx.f32(), d.n, d.c, d.s, d.count, *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(conv2d, bindConv<cpu::conv2d, ConvOp::kForward>)
DTC_CPU_BINDER(conv2d_grad_input, bindConv<cpu::conv2dGradInput, ConvOp::kGradInput>)
DTC_CPU_BINDER(conv2d_grad_weight, bindConv<cpu::conv2dGradWeight, ConvOp::kGradWeight>)
DTC_CPU_BINDER(max_pool2d, bindMaxPool2d)
DTC_CPU_BINDER(max_pool2d_grad, bindMaxPool2dGrad)
DTC_CPU_BINDER(batch_norm_train, bindBatchNormTrain)
DTC_CPU_BINDER(batch_norm_train_grad, bindBatchNormTrainGrad)
DTC_CPU_BINDER(batch_norm_eval, bindBatchNormEval)
DTC_CPU_BINDER(batch_norm_sum, bindBatchNormSum)
DTC_CPU_BINDER(batch_norm_centered_squares, bindBatchNormCenteredSquares)
DTC_CPU_BINDER(batch_norm_normalize, bindBatchNormNormalize)
DTC_CPU_BINDER(batch_norm_grad_sums, bindBatchNormGradSums)
DTC_CPU_BINDER(batch_norm_grad_input, bindBatchNormGradInput)

}  // namespace dtc
