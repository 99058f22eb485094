// Losses on CUDA (cpu/cpu_loss_table.cc's ops), with the CPU's contracts
// (exec/loss_contracts.h). Scalars the CPU reads on the host (dloss) are read by the kernels on
// the device; a label outside the classes raises an error flag, reported at the next
// synchronisation.
#include "cuda_bind.h"
#include "exec/core_contracts.h"
#include "exec/loss_contracts.h"
#include "exec/precision_contracts.h"

namespace dtc::cuda {
namespace {

// The mean loss is summed from one double per row (its step scratch); a flag reports labels that
// are no class.
StatusOr<BoundStep> bindCrossEntropy(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropy(ctx));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(void* rowLoss, stepScratch(ctx, dev, d.rows * sizeof(double)));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, labelOutsideMessage(d.classes)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::softmaxCrossEntropy(logits.f32(), labels.i64(), d.rows, d.classes,
                                                 d.divisor, d.ignored, loss.f32(),
                                                 static_cast<double*>(rowLoss), bad, stream),
                    where);
  });
}

StatusOr<BoundStep> bindCrossEntropyGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropyGrad(ctx));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView dlogits = ctx.outputs[0];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::softmaxCrossEntropyGrad(dloss.f32(), logits.f32(), labels.i64(), d.rows, d.classes,
                                         d.divisor, d.ignored, dlogits.f32(), stream),
        where);
  });
}

// The loss and its gradient from one read of the logits (f32, or one 16-bit type for logits and
// dlogits alike), which dlogits may be written over.
StatusOr<BoundStep> bindCrossEntropyWithGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const DType low, sharedLowPrecision(ctx));
  StepContext f32 = ctx;
  if (low != DType::kF32) {
    if (ctx.inputs.size() != 3 || ctx.outputs.size() != 2)
      return invalid(ctx, "expects 3 inputs and 2 outputs");
    if (ctx.inputs[0].dtype != low || ctx.outputs[1].dtype != low)
      return invalid(ctx,
                     "logits and dlogits must share one element type beside float32 "
                     "losses");
    f32.inputs[0].dtype = f32.outputs[1].dtype = DType::kF32;
  }
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropyWithGrad(f32));
  const kernels::Float type = low == DType::kBF16  ? kernels::Float::kBF16
                              : low == DType::kF16 ? kernels::Float::kF16
                                                   : kernels::Float::kF32;
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], dloss = ctx.inputs[2];
  TensorView loss = ctx.outputs[0], dlogits = ctx.outputs[1];
  DTC_ASSIGN_OR_RETURN(void* rowLoss, stepScratch(ctx, dev, d.rows * sizeof(double)));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, labelOutsideMessage(d.classes)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::softmaxCrossEntropyWithGrad(
            logits.data, type, labels.i64(), dloss.f32(), d.rows, d.classes, d.divisor, d.ignored,
            loss.f32(), static_cast<double*>(rowLoss), dlogits.data, bad, stream),
        where);
  });
}

StatusOr<BoundStep> bindNllLoss(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(NllDims d, checkNllLoss(ctx));
  TensorView x = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  void* rowLoss = nullptr;
  if (!d.perRow) {
    DTC_ASSIGN_OR_RETURN(rowLoss, stepScratch(ctx, dev, d.rows * sizeof(double)));
  }
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, labelOutsideMessage(d.classes)));
  const kernels::NllShape shape{d.rows, d.classes, d.divisor, d.perRow};
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::nllLoss(x.f32(), labels.i64(), weight, shape, d.ignored, loss.f32(),
                                     static_cast<double*>(rowLoss), bad, stream),
                    where);
  });
}

StatusOr<BoundStep> bindNllLossGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(NllDims d, checkNllLossGrad(ctx));
  TensorView dloss = ctx.inputs[0], labels = ctx.inputs[2], dx = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  const kernels::NllShape shape{d.rows, d.classes, d.divisor, d.perRow};
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::nllLossGrad(dloss.f32(), labels.i64(), weight, shape, d.ignored, dx.f32(), stream),
        where);
  });
}

StatusOr<BoundStep> bindLabelFraction(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(LabelFractionDims d, checkLabelFraction(ctx));
  TensorView labels = ctx.inputs[0], out = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::labelFraction(labels.i64(), d.labels, weight, d.classes, d.ignored,
                                           d.divisor, out.f32(), stream),
                    where);
  });
}

StatusOr<BoundStep> bindMse(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(MseDims d, checkMse(ctx));
  TensorView pred = ctx.inputs[0], target = ctx.inputs[1], loss = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(void* partial, stepScratch(ctx, dev, kernels::kSumBlocks * sizeof(double)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::mse(pred.f32(), target.f32(), d.elements, d.divisor, loss.f32(),
                                 static_cast<double*>(partial), stream),
                    where);
  });
}

StatusOr<BoundStep> bindMseGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(MseDims d, checkMseGrad(ctx));
  TensorView dloss = ctx.inputs[0], pred = ctx.inputs[1], target = ctx.inputs[2];
  TensorView dpred = ctx.outputs[0];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::mseGrad(dloss.f32(), pred.f32(), target.f32(), d.elements, d.divisor,
                                     dpred.f32(), stream),
                    where);
  });
}

}  // namespace

DTC_CUDA_BINDER(softmax_cross_entropy, bindCrossEntropy)
DTC_CUDA_BINDER(softmax_cross_entropy_grad, bindCrossEntropyGrad)
DTC_CUDA_BINDER(softmax_cross_entropy_with_grad, bindCrossEntropyWithGrad)
DTC_CUDA_BINDER(label_fraction, bindLabelFraction)
DTC_CUDA_BINDER(nll_loss, bindNllLoss)
DTC_CUDA_BINDER(nll_loss_grad, bindNllLossGrad)
DTC_CUDA_BINDER(mse, bindMse)
DTC_CUDA_BINDER(mse_grad, bindMseGrad)

}  // namespace dtc::cuda
