// Binders of the cut cross-entropy ops (cross_entropy_*), with the contracts of
// exec/loss_contracts.h. `vocab_axes` names the mesh axes that split the classes; this device's
// block starts at its index over them times its classes (vocabularyBlock).
#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "exec/loss_contracts.h"

namespace dtc {
namespace {

Status checkLabels(const std::string& where, const TensorView& labels, int64_t total,
                   IgnoredLabel ignored) {
  const int64_t* p = labels.i64();
  for (int64_t i = 0, n = labels.numElements(); i < n; ++i)
    if ((p[i] < 0 || p[i] >= total) && !ignored.ignores(p[i]))
      return Status::InvalidInput(where + labelOutsideMessage(total));
  return Status::Ok();
}

StatusOr<BoundStep> bindRowMax(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyRowMax(ctx));
  TensorView logits = ctx.inputs[0], out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::crossEntropyRowMax(logits.f32(), d.rows, d.classes, out.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindParts(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyParts(ctx));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], rowMax = ctx.inputs[2];
  TensorView sumExp = ctx.outputs[0], target = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(checkLabels(where, labels, d.total, d.ignored));
    cpu::crossEntropyParts(logits.f32(), labels.i64(), rowMax.f32(), d.rows, d.classes, d.offset,
                           sumExp.f32(), target.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCombine(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyCombine(ctx));
  TensorView m = ctx.inputs[0], s = ctx.inputs[1], t = ctx.inputs[2], loss = ctx.outputs[0];
  const int64_t* labels = ctx.inputs.size() > 3 ? ctx.inputs[3].i64() : nullptr;
  return BoundStep([=] {
    *loss.f32() =
        cpu::crossEntropyCombine(m.f32(), s.f32(), t.f32(), d.rows, d.count, labels, d.ignored);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindPartsGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(VocabCrossEntropyDims d, checkCrossEntropyPartsGrad(ctx));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView rowMax = ctx.inputs[3], sumExp = ctx.inputs[4], dlogits = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(checkLabels(where, labels, d.total, d.ignored));
    cpu::crossEntropyPartsGrad(*dloss.f32(), logits.f32(), labels.i64(), rowMax.f32(), sumExp.f32(),
                               d.rows, d.classes, d.offset, d.count, dlogits.f32(), *pool,
                               d.ignored);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(cross_entropy_row_max, bindRowMax)
DTC_CPU_BINDER(cross_entropy_parts, bindParts)
DTC_CPU_BINDER(cross_entropy_combine, bindCombine)
DTC_CPU_BINDER(cross_entropy_parts_grad, bindPartsGrad)

}  // namespace dtc
