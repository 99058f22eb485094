// The operand contracts of the losses: softmax cross-entropy and MSE (cpu/cpu_kernel_table.cc)
// and the cut cross-entropy of a vocabulary split over devices (cross_entropy_*,
// cpu/cpu_vocab_parallel_table.cc), shared by the CPU and CUDA kernel tables so both backends
// accept the same steps and refuse the others with the same messages. Labels themselves are data,
// checked when the steps run (by each backend in its own way).
#pragma once

#include <string>

#include "exec/bind_util.h"
#include "ops/ignored_label.h"

namespace dtc {

// A mean loss's divisor: the `count` attribute (the global rows or elements of a partitioned
// or accumulated batch), at least the local ones; 0 when absent (the kernel's own count).
inline StatusOr<int64_t> lossDivisor(const StepContext& ctx, int64_t local) {
  int64_t count = ctx.intAttr("count");
  if (count != 0 && count < local)
    return invalid(ctx, "count " + std::to_string(count) + " is below the " +
                            std::to_string(local) + " elements it averages");
  return count;
}

// Softmax cross-entropy over logits [rows, classes] and int64 labels [rows].
struct CrossEntropyDims {
  int64_t rows = 0, classes = 0, divisor = 0;
  IgnoredLabel ignored;
};

inline IgnoredLabel ignoredLabel(const StepContext& ctx) {
  return {ctx.hasAttr("ignore_index"), ctx.intAttr("ignore_index")};
}

inline Status crossEntropyShapes(const StepContext& ctx, const TensorView& logits,
                                 const TensorView& labels) {
  if (logits.shape.size() != 2 || labels.shape != Shape{logits.shape[0]})
    return invalid(ctx, "needs logits [N,C] and labels [N], got " + str(logits.shape) + " and " +
                            str(labels.shape));
  return Status::Ok();
}

// softmax_cross_entropy: (logits, labels) -> scalar loss.
inline StatusOr<CrossEntropyDims> checkCrossEntropy(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1], &loss = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(crossEntropyShapes(ctx, logits, labels));
  if (loss.numElements() != 1) return invalid(ctx, "loss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, logits.shape[0]));
  return CrossEntropyDims{logits.shape[0], logits.shape[1], divisor, ignoredLabel(ctx)};
}

// softmax_cross_entropy_grad: (dloss, logits, labels) -> dlogits.
inline StatusOr<CrossEntropyDims> checkCrossEntropyGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1, {2}));
  const TensorView &dloss = ctx.inputs[0], &logits = ctx.inputs[1], &labels = ctx.inputs[2];
  DTC_RETURN_IF_ERROR(crossEntropyShapes(ctx, logits, labels));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, ctx.outputs[0]));
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, logits.shape[0]));
  return CrossEntropyDims{logits.shape[0], logits.shape[1], divisor, ignoredLabel(ctx)};
}

// label_fraction: int64 labels (any shape) -> the fraction of them not ignore_index, of
// `count` (0: their own number).
struct LabelFractionDims {
  int64_t labels = 0, divisor = 0, ignore = 0;
};

inline StatusOr<LabelFractionDims> checkLabelFraction(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1, {0}));
  if (ctx.outputs[0].numElements() != 1) return invalid(ctx, "the fraction must be a scalar");
  if (!ctx.hasAttr("ignore_index")) return invalid(ctx, "needs the ignore_index it counts out");
  const int64_t n = ctx.inputs[0].numElements();
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, n));
  return LabelFractionDims{n, divisor, ctx.intAttr("ignore_index")};
}

// Mean squared error over `elements` values.
struct MseDims {
  int64_t elements = 0, divisor = 0;
};

// mse: (pred, target) -> scalar loss.
inline StatusOr<MseDims> checkMse(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  if (ctx.outputs[0].numElements() != 1) return invalid(ctx, "loss must be a scalar");
  const int64_t elements = ctx.inputs[0].numElements();
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, elements));
  return MseDims{elements, divisor};
}

// mse_grad: (dloss, pred, target) -> dpred.
inline StatusOr<MseDims> checkMseGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.inputs[2]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
  if (ctx.inputs[0].numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  const int64_t elements = ctx.inputs[1].numElements();
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, elements));
  return MseDims{elements, divisor};
}

// ---- The cut cross-entropy (cross_entropy_*): logits [rows, classes] hold this device's block
// of the classes, placed by `vocab_axes` (vocabularyBlock).

struct VocabCrossEntropyDims {
  int64_t rows = 0, classes = 0;
  int64_t offset = 0, total = 0;  // first class held here; classes over all devices
  int64_t count = 0;              // the rows averaged over (combine, parts_grad)
  IgnoredLabel ignored;           // rows that add nothing (combine reads the labels for it)
};

inline Status vocabRows(const StepContext& ctx, const TensorView& logits,
                        std::initializer_list<const TensorView*> perRow) {
  if (logits.shape.size() != 2) return invalid(ctx, "logits must be [rows, classes]");
  for (const TensorView* t : perRow)
    if (t->shape != Shape{logits.shape[0]}) return invalid(ctx, "per-row tensors must be [rows]");
  return Status::Ok();
}

// cross_entropy_row_max: logits -> the rows' maxima.
inline StatusOr<VocabCrossEntropyDims> checkCrossEntropyRowMax(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  const TensorView& logits = ctx.inputs[0];
  DTC_RETURN_IF_ERROR(vocabRows(ctx, logits, {&ctx.outputs[0]}));
  VocabCrossEntropyDims d;
  d.rows = logits.shape[0], d.classes = logits.shape[1];
  return d;
}

// cross_entropy_parts: (logits, labels, row max) -> (sum of exponentials, target logit).
inline StatusOr<VocabCrossEntropyDims> checkCrossEntropyParts(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2, {1}));
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1], &rowMax = ctx.inputs[2];
  const TensorView &sumExp = ctx.outputs[0], &target = ctx.outputs[1];
  DTC_RETURN_IF_ERROR(vocabRows(ctx, logits, {&labels, &rowMax, &sumExp, &target}));
  VocabCrossEntropyDims d;
  d.rows = logits.shape[0], d.classes = logits.shape[1];
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, d.classes));
  d.offset = block.first, d.total = block.second;
  d.ignored = ignoredLabel(ctx);
  return d;
}

// cross_entropy_combine: (row max, sum of exponentials, target logit) -> the mean loss over
// `count` rows.
// With ignore_index, a fourth input: the rows' labels.
inline StatusOr<VocabCrossEntropyDims> checkCrossEntropyCombine(const StepContext& ctx) {
  const bool ignores = ctx.hasAttr("ignore_index");
  DTC_RETURN_IF_ERROR(ignores ? expect(ctx, 4, 1, {3}) : expect(ctx, 3, 1));
  const TensorView &m = ctx.inputs[0], &s = ctx.inputs[1], &t = ctx.inputs[2],
                   &loss = ctx.outputs[0];
  if (m.shape.size() != 1 || s.shape != m.shape || t.shape != m.shape || loss.numElements() != 1)
    return invalid(ctx, "needs three [rows] vectors and a scalar loss");
  if (ignores && ctx.inputs[3].shape != m.shape) return invalid(ctx, "labels must be [rows]");
  int64_t count = ctx.intAttr("count");
  if (count < m.shape[0]) return invalid(ctx, "count is below the rows it averages");
  VocabCrossEntropyDims d;
  d.rows = m.shape[0], d.count = count;
  d.ignored = ignoredLabel(ctx);
  return d;
}

// cross_entropy_parts_grad: (dloss, logits, labels, row max, sum of exponentials) -> dlogits.
inline StatusOr<VocabCrossEntropyDims> checkCrossEntropyPartsGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 1, {2}));
  const TensorView &dloss = ctx.inputs[0], &logits = ctx.inputs[1], &labels = ctx.inputs[2];
  const TensorView &rowMax = ctx.inputs[3], &sumExp = ctx.inputs[4];
  DTC_RETURN_IF_ERROR(vocabRows(ctx, logits, {&labels, &rowMax, &sumExp}));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, ctx.outputs[0]));
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  int64_t count = ctx.intAttr("count");
  if (count < logits.shape[0]) return invalid(ctx, "count is below the rows it averages");
  VocabCrossEntropyDims d;
  d.rows = logits.shape[0], d.classes = logits.shape[1], d.count = count;
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, d.classes));
  d.offset = block.first, d.total = block.second;
  d.ignored = ignoredLabel(ctx);
  return d;
}

// The message of a label outside [0, total) (the data's class labels do not fit the model).
inline std::string labelOutsideMessage(int64_t total) {
  return "a label is outside [0, " + std::to_string(total) +
         ") (the data's class labels do not fit the model)";
}

}  // namespace dtc
