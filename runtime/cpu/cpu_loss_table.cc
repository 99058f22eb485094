// The CPU backend's losses: softmax cross-entropy (alone, its gradient, and both in one step),
// negative log-likelihood, MSE and the share of labels that count; with the contracts of
// exec/loss_contracts.h.
#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "exec/loss_contracts.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindCrossEntropy(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropy(ctx));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    if (!cpu::softmaxCrossEntropy(logits.f32(), labels.i64(), d.rows, d.classes, loss.f32(), *pool,
                                  d.divisor, d.ignored))
      return Status::InvalidInput(where + labelOutsideMessage(d.classes));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCrossEntropyGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropyGrad(ctx));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView dlogits = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::softmaxCrossEntropyGrad(dloss.f32(), logits.f32(), labels.i64(), d.rows, d.classes,
                                 dlogits.f32(), *pool, d.divisor, d.ignored);
    return Status::Ok();
  });
}

// The loss as softmax_cross_entropy computes it, then its gradient as softmax_cross_entropy_grad
// does (which takes each row's statistics before writing it, so dlogits may be the logits).
StatusOr<BoundStep> bindCrossEntropyWithGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropyWithGrad(ctx));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], dloss = ctx.inputs[2];
  TensorView loss = ctx.outputs[0], dlogits = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    if (!cpu::softmaxCrossEntropy(logits.f32(), labels.i64(), d.rows, d.classes, loss.f32(), *pool,
                                  d.divisor, d.ignored))
      return Status::InvalidInput(where + labelOutsideMessage(d.classes));
    cpu::softmaxCrossEntropyGrad(dloss.f32(), logits.f32(), labels.i64(), d.rows, d.classes,
                                 dlogits.f32(), *pool, d.divisor, d.ignored);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindNllLoss(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(NllDims d, checkNllLoss(ctx));
  TensorView x = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  const cpu::NllShape shape{d.rows, d.classes, d.divisor, d.perRow};
  std::string where = ctx.where();
  return BoundStep([=] {
    if (!cpu::nllLoss(x.f32(), labels.i64(), weight, shape, loss.f32(), d.ignored))
      return Status::InvalidInput(where + labelOutsideMessage(d.classes));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindNllLossGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(NllDims d, checkNllLossGrad(ctx));
  TensorView dloss = ctx.inputs[0], labels = ctx.inputs[2], dx = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  const cpu::NllShape shape{d.rows, d.classes, d.divisor, d.perRow};
  return BoundStep([=] {
    cpu::nllLossGrad(dloss.f32(), labels.i64(), weight, shape, dx.f32(), d.ignored);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindLabelFraction(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LabelFractionDims d, checkLabelFraction(ctx));
  TensorView labels = ctx.inputs[0], out = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  return BoundStep([=] {
    *out.f32() =
        cpu::labelFraction(labels.i64(), d.labels, weight, d.classes, d.ignored, d.divisor);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMse(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(MseDims d, checkMse(ctx));
  TensorView pred = ctx.inputs[0], target = ctx.inputs[1], loss = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::mse(pred.f32(), target.f32(), d.elements, loss.f32(), *pool, d.divisor);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMseGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(MseDims d, checkMseGrad(ctx));
  TensorView dloss = ctx.inputs[0], pred = ctx.inputs[1], target = ctx.inputs[2];
  TensorView dpred = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::mseGrad(dloss.f32(), pred.f32(), target.f32(), d.elements, dpred.f32(), *pool, d.divisor);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(softmax_cross_entropy, bindCrossEntropy)
DTC_CPU_BINDER(softmax_cross_entropy_with_grad, bindCrossEntropyWithGrad)
DTC_CPU_BINDER(softmax_cross_entropy_grad, bindCrossEntropyGrad)
DTC_CPU_BINDER(label_fraction, bindLabelFraction)
DTC_CPU_BINDER(nll_loss, bindNllLoss)
DTC_CPU_BINDER(nll_loss_grad, bindNllLossGrad)
DTC_CPU_BINDER(mse, bindMse)
DTC_CPU_BINDER(mse_grad, bindMseGrad)

}  // namespace dtc
