// The cut cross-entropy ops (cross_entropy_*) on CUDA, with the CPU's contracts
// (exec/loss_contracts.h). `vocab_axes` places this device's block of classes (vocabularyBlock);
// labels are checked against all classes on the device (an error flag, reported at
// synchronisation).
#include "cuda_bind.h"
#include "exec/loss_contracts.h"

namespace dtc::cuda {
namespace {

StatusOr<int*> labelFlag(Device& dev, const StepContext& ctx, int64_t total) {
  return dataErrorFlag(dev, ctx, labelOutsideMessage(total));
}

StatusOr<BoundStep> bindRowMax(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyRowMax(ctx));
  const float* logits = ctx.inputs[0].f32();
  float* out = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::crossEntropyRowMax(logits, d.rows, d.classes, out, stream), where);
  });
}

StatusOr<BoundStep> bindParts(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyParts(ctx));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], rowMax = ctx.inputs[2];
  TensorView sumExp = ctx.outputs[0], target = ctx.outputs[1];
  DTC_ASSIGN_OR_RETURN(int* bad, labelFlag(dev, ctx, d.total));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::crossEntropyParts(logits.f32(), labels.i64(), rowMax.f32(), d.rows,
                                               d.classes, d.offset, d.total, d.ignored,
                                               sumExp.f32(), target.f32(), bad, stream),
                    where);
  });
}

StatusOr<BoundStep> bindCombine(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyCombine(ctx));
  TensorView m = ctx.inputs[0], s = ctx.inputs[1], t = ctx.inputs[2], loss = ctx.outputs[0];
  const int64_t* labels = ctx.inputs.size() > 3 ? ctx.inputs[3].i64() : nullptr;
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::crossEntropyCombine(m.f32(), s.f32(), t.f32(), labels, d.ignored,
                                                 d.rows, d.count, loss.f32(), stream),
                    where);
  });
}

StatusOr<BoundStep> bindPartsGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyPartsGrad(ctx));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView rowMax = ctx.inputs[3], sumExp = ctx.inputs[4], dlogits = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int* bad, labelFlag(dev, ctx, d.total));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::crossEntropyPartsGrad(dloss.f32(), logits.f32(), labels.i64(), rowMax.f32(),
                                       sumExp.f32(), d.rows, d.classes, d.offset, d.total, d.count,
                                       d.ignored, dlogits.f32(), bad, stream),
        where);
  });
}

}  // namespace

DTC_CUDA_BINDER(cross_entropy_row_max, bindRowMax)
DTC_CUDA_BINDER(cross_entropy_parts, bindParts)
DTC_CUDA_BINDER(cross_entropy_combine, bindCombine)
DTC_CUDA_BINDER(cross_entropy_parts_grad, bindPartsGrad)

}  // namespace dtc::cuda
