// Binders of the cut cross-entropy ops (cross_entropy_*). `vocab_axes` names the mesh axes that
// split the classes; this device's block starts at its index over them times its classes.
#include "exec/bind_util.h"

namespace dtc {
namespace {

struct VocabBlock {
  int64_t offset = 0, total = 0;  // first class held here; classes over all devices
};

StatusOr<VocabBlock> vocabBlock(const StepContext& ctx, int64_t localClasses) {
  std::vector<int64_t> axes64 = ctx.intsAttr("vocab_axes");
  VocabBlock block{0, localClasses};
  if (axes64.empty()) return block;
  if (!ctx.mesh) return invalid(ctx, "a split vocabulary in a plan run without a device mesh");
  std::vector<int> axes(axes64.begin(), axes64.end());
  for (int a : axes)
    if (a < 0 || a >= static_cast<int>(ctx.mesh->sizes().size()))
      return invalid(ctx, "names mesh axis " + std::to_string(a));
  block.offset = ctx.mesh->indexIn(axes) * localClasses;
  block.total = ctx.mesh->groupSize(axes) * localClasses;
  return block;
}

Status checkRows(const StepContext& ctx, const TensorView& logits,
                 std::initializer_list<const TensorView*> perRow) {
  if (logits.shape.size() != 2) return invalid(ctx, "logits must be [rows, classes]");
  for (const TensorView* t : perRow)
    if (t->shape != Shape{logits.shape[0]}) return invalid(ctx, "per-row tensors must be [rows]");
  return Status::Ok();
}

Status checkLabels(const std::string& where, const TensorView& labels, int64_t total) {
  const int64_t* p = labels.i64();
  for (int64_t i = 0, n = labels.numElements(); i < n; ++i)
    if (p[i] < 0 || p[i] >= total)
      return Status::InvalidInput(where + "a label is outside [0, " + std::to_string(total) +
                                  ") (the data's class labels do not fit the model)");
  return Status::Ok();
}

StatusOr<BoundStep> bindRowMax(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  TensorView logits = ctx.inputs[0], out = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkRows(ctx, logits, {&out}));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::crossEntropyRowMax(logits.f32(), logits.shape[0], logits.shape[1], out.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindParts(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2, {1}));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], rowMax = ctx.inputs[2];
  TensorView sumExp = ctx.outputs[0], target = ctx.outputs[1];
  DTC_RETURN_IF_ERROR(checkRows(ctx, logits, {&labels, &rowMax, &sumExp, &target}));
  DTC_ASSIGN_OR_RETURN(VocabBlock block, vocabBlock(ctx, logits.shape[1]));
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(checkLabels(where, labels, block.total));
    cpu::crossEntropyParts(logits.f32(), labels.i64(), rowMax.f32(), logits.shape[0],
                           logits.shape[1], block.offset, sumExp.f32(), target.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCombine(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  TensorView m = ctx.inputs[0], s = ctx.inputs[1], t = ctx.inputs[2], loss = ctx.outputs[0];
  if (m.shape.size() != 1 || s.shape != m.shape || t.shape != m.shape || loss.numElements() != 1)
    return invalid(ctx, "needs three [rows] vectors and a scalar loss");
  int64_t count = ctx.intAttr("count");
  if (count < m.shape[0]) return invalid(ctx, "count is below the rows it averages");
  return BoundStep([=] {
    *loss.f32() = cpu::crossEntropyCombine(m.f32(), s.f32(), t.f32(), m.shape[0], count);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindPartsGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 1, {2}));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView rowMax = ctx.inputs[3], sumExp = ctx.inputs[4], dlogits = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkRows(ctx, logits, {&labels, &rowMax, &sumExp}));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, dlogits));
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  int64_t count = ctx.intAttr("count");
  if (count < logits.shape[0]) return invalid(ctx, "count is below the rows it averages");
  DTC_ASSIGN_OR_RETURN(VocabBlock block, vocabBlock(ctx, logits.shape[1]));
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(checkLabels(where, labels, block.total));
    cpu::crossEntropyPartsGrad(*dloss.f32(), logits.f32(), labels.i64(), rowMax.f32(),
                               sumExp.f32(), logits.shape[0], logits.shape[1], block.offset,
                               count, dlogits.f32(), *pool);
    return Status::Ok();
  });
}

}  // namespace

StatusOr<std::pair<int64_t, int64_t>> vocabularyBlock(const StepContext& ctx, int64_t localRows) {
  DTC_ASSIGN_OR_RETURN(VocabBlock block, vocabBlock(ctx, localRows));
  return std::make_pair(block.offset, block.total);
}

const BinderTable& vocabParallelBinders() {
  static const BinderTable table = {
      {"cross_entropy_row_max", bindRowMax},
      {"cross_entropy_parts", bindParts},
      {"cross_entropy_combine", bindCombine},
      {"cross_entropy_parts_grad", bindPartsGrad},
  };
  return table;
}

}  // namespace dtc
