// The cut cross-entropy ops (cross_entropy_*) on CUDA, with exec/cpu_vocab_parallel_table.cc's
// contracts. `vocab_axes` places this device's block of classes (vocabularyBlock); labels are
// checked against all classes on the device (an error flag, reported at synchronisation).
#include "cuda_bind.h"

namespace dtc::cuda {
namespace {

Status checkRows(const StepContext& ctx, const TensorView& logits, std::initializer_list<const TensorView*> perRow) {
  if (logits.shape.size() != 2) return invalid(ctx, "logits must be [rows, classes]");
  for (const TensorView* t : perRow)
    if (t->shape != Shape{logits.shape[0]}) return invalid(ctx, "per-row tensors must be [rows]");
  return Status::Ok();
}

StatusOr<int*> labelFlag(Device& dev, const StepContext& ctx, int64_t total) {
  return dataErrorFlag(dev, ctx, "a label is outside [0, " + std::to_string(total) +
                                     ") (the data's class labels do not fit the model)");
}

StatusOr<BoundStep> bindRowMax(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  TensorView logits = ctx.inputs[0], out = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkRows(ctx, logits, {&out}));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::crossEntropyRowMax(logits.f32(), logits.shape[0], logits.shape[1], out.f32(), stream),
                    where);
  });
}

StatusOr<BoundStep> bindParts(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2, {1}));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], rowMax = ctx.inputs[2];
  TensorView sumExp = ctx.outputs[0], target = ctx.outputs[1];
  DTC_RETURN_IF_ERROR(checkRows(ctx, logits, {&labels, &rowMax, &sumExp, &target}));
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, logits.shape[1]));
  DTC_ASSIGN_OR_RETURN(int* bad, labelFlag(dev, ctx, block.second));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::crossEntropyParts(logits.f32(), labels.i64(), rowMax.f32(), logits.shape[0],
                                               logits.shape[1], block.first, block.second, sumExp.f32(),
                                               target.f32(), bad, stream),
                    where);
  });
}

StatusOr<BoundStep> bindCombine(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  TensorView m = ctx.inputs[0], s = ctx.inputs[1], t = ctx.inputs[2], loss = ctx.outputs[0];
  if (m.shape.size() != 1 || s.shape != m.shape || t.shape != m.shape || loss.numElements() != 1)
    return invalid(ctx, "needs three [rows] vectors and a scalar loss");
  int64_t count = ctx.intAttr("count");
  if (count < m.shape[0]) return invalid(ctx, "count is below the rows it averages");
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::crossEntropyCombine(m.f32(), s.f32(), t.f32(), m.shape[0], count, loss.f32(), stream),
                    where);
  });
}

StatusOr<BoundStep> bindPartsGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 1, {2}));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView rowMax = ctx.inputs[3], sumExp = ctx.inputs[4], dlogits = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkRows(ctx, logits, {&labels, &rowMax, &sumExp}));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, dlogits));
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  int64_t count = ctx.intAttr("count");
  if (count < logits.shape[0]) return invalid(ctx, "count is below the rows it averages");
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, logits.shape[1]));
  DTC_ASSIGN_OR_RETURN(int* bad, labelFlag(dev, ctx, block.second));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::crossEntropyPartsGrad(dloss.f32(), logits.f32(), labels.i64(), rowMax.f32(),
                                                   sumExp.f32(), logits.shape[0], logits.shape[1], block.first,
                                                   block.second, count, dlogits.f32(), bad, stream),
                    where);
  });
}

}  // namespace

const CudaBinderTable& vocabParallelCudaBinders() {
  static const CudaBinderTable table = {
      {"cross_entropy_row_max", bindRowMax},
      {"cross_entropy_parts", bindParts},
      {"cross_entropy_combine", bindCombine},
      {"cross_entropy_parts_grad", bindPartsGrad},
  };
  return table;
}

}  // namespace dtc::cuda
