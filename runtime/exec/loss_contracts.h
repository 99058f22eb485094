// The operand contracts of the losses: softmax cross-entropy and MSE (cpu/cpu_loss_table.cc)
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

// Softmax cross-entropy over logits [rows, classes] and int64 labels [rows] (or [..., classes]
// and [...]: every leading index a row).
struct CrossEntropyDims {
  int64_t rows = 0, classes = 0, divisor = 0;
  IgnoredLabel ignored;
};

inline IgnoredLabel ignoredLabel(const StepContext& ctx) {
  return {ctx.hasAttr("ignore_index"), ctx.intAttr("ignore_index")};
}

inline Status crossEntropyShapes(const StepContext& ctx, const TensorView& logits,
                                 const TensorView& labels) {
  if (logits.shape.size() < 2 ||
      labels.shape != Shape(logits.shape.begin(), logits.shape.end() - 1))
    return invalid(ctx, "needs logits [N,C] and labels [N] (or [..., C] and [...]), got " +
                            str(logits.shape) + " and " + str(labels.shape));
  return Status::Ok();
}

// Rows and classes of logits [..., C] that crossEntropyShapes accepted.
inline CrossEntropyDims crossEntropyDims(const StepContext& ctx, const TensorView& logits,
                                         int64_t divisor) {
  const int64_t classes = logits.shape.back();
  return CrossEntropyDims{classes ? logits.numElements() / classes : 0, classes, divisor,
                          ignoredLabel(ctx)};
}

// softmax_cross_entropy: (logits, labels) -> scalar loss.
inline StatusOr<CrossEntropyDims> checkCrossEntropy(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1], &loss = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(crossEntropyShapes(ctx, logits, labels));
  if (loss.numElements() != 1) return invalid(ctx, "loss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, labels.numElements()));
  return crossEntropyDims(ctx, logits, divisor);
}

// softmax_cross_entropy_grad: (dloss, logits, labels) -> dlogits.
inline StatusOr<CrossEntropyDims> checkCrossEntropyGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1, {2}));
  const TensorView &dloss = ctx.inputs[0], &logits = ctx.inputs[1], &labels = ctx.inputs[2];
  DTC_RETURN_IF_ERROR(crossEntropyShapes(ctx, logits, labels));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, ctx.outputs[0]));
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, labels.numElements()));
  return crossEntropyDims(ctx, logits, divisor);
}

// softmax_cross_entropy_with_grad: (logits, labels, dloss) -> (loss, dlogits): both steps in
// one, the loss and its gradient from one read of the logits (under mixed precision 16-bit
// logits and dlogits, which may be written over the logits).
inline StatusOr<CrossEntropyDims> checkCrossEntropyWithGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2, {1}));
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1], &dloss = ctx.inputs[2];
  DTC_RETURN_IF_ERROR(crossEntropyShapes(ctx, logits, labels));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, ctx.outputs[1]));
  if (ctx.outputs[0].numElements() != 1) return invalid(ctx, "loss must be a scalar");
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, labels.numElements()));
  return crossEntropyDims(ctx, logits, divisor);
}

// nll_loss: (log-probabilities x [rows, C], labels [rows], class weights [C]?) -> the mean (a
// scalar), or with `per_row` each row's loss [rows]. nll_loss_grad: (dloss, x, labels,
// weights?) -> dx, dloss a scalar or (per_row) [rows].
struct NllDims {
  int64_t rows = 0, classes = 0, divisor = 0;
  IgnoredLabel ignored;
  int weightInput = -1;  // the class weights' input, -1: none
  bool perRow = false;
};

// The class weights a loss step reads (`input` from its contract's dims), or null.
inline const float* classWeights(const StepContext& ctx, int input) {
  return input >= 0 ? ctx.inputs[input].f32() : nullptr;
}

inline StatusOr<NllDims> nllDims(const StepContext& ctx, size_t first) {
  const size_t n = ctx.inputs.size();
  if (n != first + 2 && n != first + 3)
    return invalid(ctx, "expects " + std::to_string(first + 2) + " inputs, or " +
                            std::to_string(first + 3) + " with class weights");
  DTC_RETURN_IF_ERROR(expect(ctx, n, 1, {first + 1}));
  const TensorView &x = ctx.inputs[first], &labels = ctx.inputs[first + 1];
  DTC_RETURN_IF_ERROR(crossEntropyShapes(ctx, x, labels));
  NllDims d{labels.numElements(),
            x.shape.back(),
            0,
            ignoredLabel(ctx),
            n == first + 3 ? static_cast<int>(first + 2) : -1,
            ctx.intAttr("per_row") != 0};
  if (d.weightInput >= 0 && ctx.inputs[d.weightInput].shape != Shape{d.classes})
    return invalid(ctx, "class weights " + str(ctx.inputs[d.weightInput].shape) + " do not match " +
                            std::to_string(d.classes) + " classes");
  if (!d.perRow) {
    DTC_ASSIGN_OR_RETURN(d.divisor, lossDivisor(ctx, d.rows));
  }
  return d;
}

inline StatusOr<NllDims> checkNllLoss(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(NllDims d, nllDims(ctx, 0));
  if (d.perRow ? ctx.outputs[0].shape != ctx.inputs[1].shape : ctx.outputs[0].numElements() != 1)
    return invalid(ctx, d.perRow ? "a per-row loss must be [rows]" : "loss must be a scalar");
  return d;
}

inline StatusOr<NllDims> checkNllLossGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(NllDims d, nllDims(ctx, 1));
  if (d.perRow ? ctx.inputs[0].shape != ctx.inputs[2].shape : ctx.inputs[0].numElements() != 1)
    return invalid(ctx, d.perRow ? "a per-row dloss must be [rows]" : "dloss must be a scalar");
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
  return d;
}

// label_fraction: (int64 labels (any shape), class weights [C]?) -> the labels that are not
// ignore_index, each counted 1 or its class's weight (0 when it is no class), over `count`
// (0: their own number).
struct LabelFractionDims {
  int64_t labels = 0, divisor = 0, classes = 0;  // classes: the weights' (0: none)
  IgnoredLabel ignored;
  int weightInput = -1;  // the class weights' input, -1: none
};

inline StatusOr<LabelFractionDims> checkLabelFraction(const StepContext& ctx) {
  const size_t n = ctx.inputs.size();
  if (n != 1 && n != 2) return invalid(ctx, "expects labels, and optionally class weights");
  DTC_RETURN_IF_ERROR(expect(ctx, n, 1, {0}));
  if (ctx.outputs[0].numElements() != 1) return invalid(ctx, "the fraction must be a scalar");
  if (n == 2 && ctx.inputs[1].shape.size() != 1)
    return invalid(ctx, "class weights must be [C], got " + str(ctx.inputs[1].shape));
  if (n == 1 && !ctx.hasAttr("ignore_index"))
    return invalid(ctx, "needs the ignore_index it counts out, or class weights");
  const int64_t labels = ctx.inputs[0].numElements();
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, labels));
  return LabelFractionDims{labels, divisor, n == 2 ? ctx.inputs[1].shape[0] : 0, ignoredLabel(ctx),
                           n == 2 ? 1 : -1};
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

// ---- The cut cross-entropy (cross_entropy_*): logits [..., classes] hold this device's block
// of the classes, placed by `vocab_axes` (vocabularyBlock); every leading index is a row, and
// per-row tensors are shaped as the leading dimensions.

struct VocabCrossEntropyDims {
  int64_t rows = 0, classes = 0;
  int64_t offset = 0, total = 0;  // first class held here; classes over all devices
  int64_t count = 0;              // the rows averaged over (combine, parts_grad)
  IgnoredLabel ignored;           // rows that add nothing (combine reads the labels for it)
};

inline Status vocabRows(const StepContext& ctx, const TensorView& logits,
                        std::initializer_list<const TensorView*> perRow) {
  if (logits.shape.size() < 2) return invalid(ctx, "logits must be [..., rows, classes]");
  const Shape rows(logits.shape.begin(), logits.shape.end() - 1);
  for (const TensorView* t : perRow)
    if (t->shape != rows) return invalid(ctx, "per-row tensors must be shaped as logits' rows");
  return Status::Ok();
}

// The rows of logits [..., classes] and their classes.
inline void vocabShape(const TensorView& logits, VocabCrossEntropyDims& d) {
  d.classes = logits.shape.back();
  d.rows = d.classes ? logits.numElements() / d.classes : 0;
}

// cross_entropy_row_max: logits -> the rows' maxima.
inline StatusOr<VocabCrossEntropyDims> checkCrossEntropyRowMax(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  const TensorView& logits = ctx.inputs[0];
  DTC_RETURN_IF_ERROR(vocabRows(ctx, logits, {&ctx.outputs[0]}));
  VocabCrossEntropyDims d;
  vocabShape(logits, d);
  return d;
}

// cross_entropy_parts: (logits, labels, row max) -> (sum of exponentials, target logit).
inline StatusOr<VocabCrossEntropyDims> checkCrossEntropyParts(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2, {1}));
  const TensorView &logits = ctx.inputs[0], &labels = ctx.inputs[1], &rowMax = ctx.inputs[2];
  const TensorView &sumExp = ctx.outputs[0], &target = ctx.outputs[1];
  DTC_RETURN_IF_ERROR(vocabRows(ctx, logits, {&labels, &rowMax, &sumExp, &target}));
  VocabCrossEntropyDims d;
  vocabShape(logits, d);
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
  if (m.shape.empty() || s.shape != m.shape || t.shape != m.shape || loss.numElements() != 1)
    return invalid(ctx, "needs three per-row tensors of one shape and a scalar loss");
  if (ignores && ctx.inputs[3].shape != m.shape)
    return invalid(ctx, "labels must be shaped as the rows");
  int64_t count = ctx.intAttr("count");
  if (count < m.numElements()) return invalid(ctx, "count is below the rows it averages");
  VocabCrossEntropyDims d;
  d.rows = m.numElements(), d.count = count;
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
  VocabCrossEntropyDims d;
  vocabShape(logits, d);
  d.count = count;
  if (count < d.rows) return invalid(ctx, "count is below the rows it averages");
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
