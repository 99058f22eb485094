// Shape inference and verifiers of the graph ops.
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "mlir/Dialect/Traits.h"

using namespace mlir;
using namespace dtc::graph;

namespace {

RankedTensorType scalarF32(MLIRContext* ctx) { return f32Tensor(ctx, {}); }

LogicalResult inferBroadcast(MLIRContext* ctx, std::optional<Location> loc, Value lhs, Value rhs,
                             SmallVectorImpl<Type>& types) {
  if (auto error = checkBroadcast(shapeOf(lhs), shapeOf(rhs)))
    return emitOptionalError(loc, *error);
  SmallVector<int64_t> shape;
  OpTrait::util::getBroadcastedShape(shapeOf(lhs), shapeOf(rhs), shape);
  types.push_back(f32Tensor(ctx, shape));
  return success();
}

}  // namespace

namespace dtc::graph {

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

std::optional<std::string> checkBroadcast(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(lhs, rhs, shape))
    return "shapes " + shapeString(lhs) + " and " + shapeString(rhs) + " do not broadcast";
  return std::nullopt;
}

std::optional<std::string> checkMatmul(ArrayRef<int64_t> a, ArrayRef<int64_t> b, bool tA, bool tB) {
  if (a.size() != 2 || b.size() != 2)
    return "matmul needs 2-D operands, got " + shapeString(a) + " and " + shapeString(b);
  int64_t ka = tA ? a[0] : a[1];
  int64_t kb = tB ? b[1] : b[0];
  if (ka != kb)
    return "matmul contraction sizes differ: " + shapeString(a) + (tA ? "^T" : "") + " x " +
           shapeString(b) + (tB ? "^T" : "") + " (" + std::to_string(ka) + " vs " +
           std::to_string(kb) + ")";
  return std::nullopt;
}

std::optional<std::string> checkCrossEntropy(ArrayRef<int64_t> logits, ArrayRef<int64_t> labels) {
  if (logits.size() < 2 || labels != logits.drop_back())
    return "cross-entropy needs logits [N,C] and labels [N] (or [..., C] and [...]), got " +
           shapeString(logits) + " and " + shapeString(labels);
  return std::nullopt;
}

std::optional<std::string> checkReduceAxes(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(shape.size()))
      return "axis " + std::to_string(axes[i]) + " out of range for shape " + shapeString(shape);
    if (i > 0 && axes[i] <= axes[i - 1]) return std::string("axes must be sorted and unique");
  }
  return std::nullopt;
}

}  // namespace dtc::graph

LogicalResult AddOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferBroadcast(ctx, loc, adaptor.getLhs(), adaptor.getRhs(), types);
}
LogicalResult SubOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferBroadcast(ctx, loc, adaptor.getLhs(), adaptor.getRhs(), types);
}
LogicalResult MulOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferBroadcast(ctx, loc, adaptor.getLhs(), adaptor.getRhs(), types);
}
LogicalResult DivOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return inferBroadcast(ctx, loc, adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> in = shapeOf(adaptor.getX());
  SmallVector<int64_t> out;
  ArrayRef<int64_t> axes = adaptor.getAxes();
  if (auto error = checkReduceAxes(in, axes)) return emitOptionalError(loc, *error);
  for (auto [i, d] : llvm::enumerate(in)) {
    if (!llvm::is_contained(axes, static_cast<int64_t>(i)))
      out.push_back(d);
    else if (adaptor.getKeepdims())
      out.push_back(1);
  }
  types.push_back(f32Tensor(ctx, out));
  return success();
}

LogicalResult ReduceSumOp::verify() {
  if (auto error = checkReduceAxes(shapeOf(getX()), getAxes())) return emitOpError(*error);
  return success();
}

LogicalResult DropoutOp::verify() {
  const float ratio = getRatio().convertToFloat();
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return emitOpError("ratio must lie in [0, 1), got ") << ratio;
  if (getMicroBatchAttr().getInt() < 0) return emitOpError("micro_batch must be >= 0");
  const int64_t rank = cast<RankedTensorType>(getX().getType()).getRank();
  std::optional<ArrayRef<int64_t>> global = getGlobalShape(), counts = getSplitCounts();
  if (global && static_cast<int64_t>(global->size()) != rank)
    return emitOpError("global_shape must have one entry per dimension");
  if (counts.has_value() != getSplitAxes().has_value() ||
      (counts && (!global || static_cast<int64_t>(counts->size()) != rank)))
    return emitOpError("split_axes and split_counts go together, one count per dimension");
  if (counts) {
    int64_t total = 0;
    for (int64_t n : *counts) {
      if (n < 0) return emitOpError("split_counts must be >= 0");
      total += n;
    }
    if (total != static_cast<int64_t>(getSplitAxes()->size()))
      return emitOpError("split_counts must add up to the number of split_axes");
  }
  return success();
}

LogicalResult BroadcastOp::verify() {
  SmallVector<int64_t> shape;
  ArrayRef<int64_t> out = shapeOf(getResult());
  if (!OpTrait::util::getBroadcastedShape(shapeOf(getX()), out, shape) ||
      ArrayRef<int64_t>(shape) != out)
    return emitOpError("cannot broadcast ")
           << shapeString(shapeOf(getX())) << " to " << shapeString(out);
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getX().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("cannot change the element type");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << shapeString(in.getShape()) << " (" << in.getNumElements() << " elements) to "
           << shapeString(out.getShape());
  return success();
}

LogicalResult CastOp::verify() {
  if (shapeOf(getX()) != shapeOf(getY()))
    return emitOpError("changes the shape ") << getX().getType() << " -> " << getY().getType();
  if (elementOf(getX()).isInteger(64) && !elementOf(getY()).isF32())
    return emitOpError("casts int64 to float32 only, not to ") << getY().getType();
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> a = shapeOf(adaptor.getLhs()), b = shapeOf(adaptor.getRhs());
  if (auto error = checkMatmul(a, b, adaptor.getTransposeLhs(), adaptor.getTransposeRhs()))
    return emitOptionalError(loc, *error);
  int64_t m = adaptor.getTransposeLhs() ? a[1] : a[0];
  int64_t n = adaptor.getTransposeRhs() ? b[0] : b[1];
  mlir::Type element = contractionElement(adaptor.getLhs(), adaptor.getRhs());
  if (!element) return emitOptionalError(loc, "matmul: operands of different element types");
  types.push_back(RankedTensorType::get(SmallVector<int64_t>{m, n}, element));
  return success();
}

bool MatmulOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) { return widenableResult(l, r); }

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type>& types) {
  if (auto error = checkCrossEntropy(shapeOf(adaptor.getLogits()), shapeOf(adaptor.getLabels())))
    return emitOptionalError(loc, *error);
  types.push_back(scalarF32(ctx));
  return success();
}

LogicalResult SoftmaxCrossEntropyGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                          Adaptor adaptor,
                                                          SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult NllLossOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (auto error = checkCrossEntropy(shapeOf(adaptor.getX()), shapeOf(adaptor.getLabels())))
    return emitOptionalError(loc, *error);
  types.push_back(adaptor.getPerRow() ? Type(RankedTensorType::get(shapeOf(adaptor.getLabels()),
                                                                   Float32Type::get(ctx)))
                                      : Type(scalarF32(ctx)));
  return success();
}

LogicalResult NllLossOp::verify() {
  if (getWeight() && shapeOf(getWeight()) != ArrayRef<int64_t>{shapeOf(getX())[1]})
    return emitOpError("class weights ") << shapeString(shapeOf(getWeight())) << " do not match "
                                         << shapeOf(getX())[1] << " classes";
  if (getPerRow() && getCount()) return emitOpError("a per-row loss has no mean count");
  return success();
}

LogicalResult NllLossGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                              Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult LabelFractionOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location>, Adaptor,
                                                SmallVectorImpl<Type>& types) {
  types.push_back(scalarF32(ctx));
  return success();
}

LogicalResult MseOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location>, Adaptor,
                                      SmallVectorImpl<Type>& types) {
  types.push_back(scalarF32(ctx));
  return success();
}

LogicalResult MseOp::verify() {
  if (getPred().getType() != getTarget().getType())
    return emitOpError("prediction ") << shapeString(shapeOf(getPred())) << " and target "
                                      << shapeString(shapeOf(getTarget())) << " differ in shape";
  return success();
}

LogicalResult MseGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>, Adaptor adaptor,
                                          SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getPred().getType());
  return success();
}

LogicalResult SgdUpdateOp::inferReturnTypes(MLIRContext*, std::optional<Location>, Adaptor adaptor,
                                            SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getParam().getType());
  types.push_back(adaptor.getParam().getType());
  return success();
}

LogicalResult SgdUpdateOp::verify() {
  if (getGrad().getType() != getParam().getType() || getBuf().getType() != getParam().getType())
    return emitOpError("parameter, gradient and momentum buffer must have one type");
  return success();
}

LogicalResult AdamwUpdateOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                              Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.append(3, adaptor.getParam().getType());
  return success();
}

LogicalResult AdamwUpdateOp::verify() {
  Type t = getParam().getType();
  if (getGrad().getType() != t || getExpAvg().getType() != t || getExpAvgSq().getType() != t)
    return emitOpError("parameter, gradient and moments must have one type");
  return success();
}

std::optional<int64_t> dtc::graph::meanCount(Operation* op) {
  auto numel = [](Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); };
  // Rows: every dimension but the classes (logits [N, C], or [B, T, C] under context
  // parallelism, whose rows are not merged).
  auto rows = [](Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    return type.getNumElements() / type.getShape().back();
  };
  std::optional<int64_t> own;
  if (auto ce = dyn_cast<SoftmaxCrossEntropyOp>(op))
    own = rows(ce.getLogits());
  else if (auto ce = dyn_cast<SoftmaxCrossEntropyGradOp>(op))
    own = rows(ce.getLogits());
  else if (auto mse = dyn_cast<MseOp>(op))
    own = numel(mse.getPred());
  else if (auto nll = dyn_cast<NllLossOp>(op); nll && !nll.getPerRow())
    own = rows(nll.getX());
  else if (auto nll = dyn_cast<NllLossGradOp>(op); nll && !nll.getPerRow())
    own = rows(nll.getX());
  else if (auto fraction = dyn_cast<LabelFractionOp>(op))
    own = numel(fraction.getLabels());
  else if (auto mse = dyn_cast<MseGradOp>(op))
    own = numel(mse.getPred());
  if (!own) return std::nullopt;
  if (auto count = op->getAttrOfType<IntegerAttr>("count")) return count.getInt();
  return own;
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

OpShardingRule SelectOp::getShardingRule() { return dtc::sharding::broadcastingRule(*this); }
void SelectOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("selects a whole tensor by the step's check, which the trace does not follow");
}

OpShardingRule BroadcastOp::getShardingRule() { return dtc::sharding::broadcastingRule(*this); }
void BroadcastOp::traceSequence(SequenceTrace& trace) {
  // Right-aligned; a sequence of one position repeated is no sequence.
  const int64_t at = trace.dim() + rankOf(getResult()) - rankOf(getX());
  if (shapeOf(getResult())[at] != shapeOf(getX())[trace.dim()])
    return trace.ordered("repeats one position");
  trace.set(getResult(), at);
}

// A count over shards is the sum of the shards' counts.
OpShardingRule NonfiniteCountOp::getShardingRule() {
  RuleBuilder b(*this);
  b.operandDims(0, b.factors(rankOf(getX())));
  return b.take();
}
void NonfiniteCountOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

// A sum over shards is the sum of the shards' sums.
OpShardingRule SumSquaresOp::getShardingRule() {
  RuleBuilder b(*this);
  b.operandDims(0, b.factors(rankOf(getX())));
  return b.take();
}
void SumSquaresOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

// Scalars alone (of the step's gradients): nothing to split.
OpShardingRule LossScaleStepOp::getShardingRule() { return RuleBuilder(*this).take(); }
void LossScaleStepOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}
OpShardingRule ClipCoefficientOp::getShardingRule() { return RuleBuilder(*this).take(); }
void ClipCoefficientOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

OpShardingRule FillOp::getShardingRule() {
  RuleBuilder b(*this);
  b.resultDims(0, b.factors(rankOf(getResult())));
  return b.take();
}
void FillOp::traceSequence(SequenceTrace&) {}  // no operands: no positions reach it

OpShardingRule ReduceSumOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> fs = b.factors(rankOf(getX()));
  b.operandDims(0, fs);
  ArrayRef<int64_t> axes = getAxes();
  for (int64_t d = 0, r = 0; d < static_cast<int64_t>(fs.size()); ++d) {
    const bool reduced = llvm::is_contained(axes, d);
    if (!reduced) b.result(0, r, fs[d]);
    if (!reduced || getKeepdims()) ++r;
  }
  return b.take();
}
void ReduceSumOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("sums over dimensions, which the trace does not follow");
}

// Reshape: dimensions are grouped into runs of equal element count; the major dimension of a
// group carries its factor to the group's major dimension on the other side (sharding it cuts
// the same contiguous blocks). Other dimensions of a merged or split group stay whole.
OpShardingRule ReshapeOp::getShardingRule() {
  RuleBuilder b(*this);
  ArrayRef<int64_t> in = shapeOf(getX()), out = shapeOf(getResult());
  size_t i = 0, o = 0;
  while (i < in.size() && o < out.size()) {
    // Size-1 dimensions carry nothing.
    if (in[i] == 1) {
      ++i;
      continue;
    }
    if (out[o] == 1) {
      ++o;
      continue;
    }
    size_t i0 = i, o0 = o;
    int64_t a = in[i++], c = out[o++];
    while (a != c) {
      if (a < c && i < in.size())
        a *= in[i++];
      else if (c < a && o < out.size())
        c *= out[o++];
      else
        break;
    }
    if (a != c) break;
    int f = b.factor();
    b.operand(0, i0, f).result(0, o0, f);
    if (i - i0 != 1 || o - o0 != 1) b.plainOnly(f);  // chunks do not survive a merge or split
  }
  return b.take();
}
// A reshape that keeps the sequence dimension (the same size, after the same number of
// elements' worth of leading dimensions) moves it; one that merges it into rows marks them.
void ReshapeOp::traceSequence(SequenceTrace& trace) {
  const int64_t d = trace.dim();
  ArrayRef<int64_t> from = shapeOf(getX()), to = shapeOf(getResult());
  int64_t before = 1;
  for (int64_t i = 0; i < d; ++i) before *= from[i];
  int64_t prefix = 1;
  for (int64_t j = 0; j < static_cast<int64_t>(to.size()); ++j) {
    if (prefix == before && to[j] == from[d]) return trace.set(getResult(), j);
    prefix *= to[j];
  }
  // Merged with the dimensions before it (rows of a loss), nothing after it.
  int64_t after = 1, merged = 1;
  for (int64_t i = d + 1; i < static_cast<int64_t>(from.size()); ++i) after *= from[i];
  for (int64_t j = 1; j < static_cast<int64_t>(to.size()); ++j) merged *= to[j];
  if (merged == after) return trace.set(getResult(), dtc::sharding::SequenceFlow::kMergedRows);
  trace.ordered("reshapes the sequence");
}

OpShardingRule MatmulOp::getShardingRule() {
  return dtc::sharding::matmulRule(*this, getTransposeLhs(), getTransposeRhs(), 0);
}
void MatmulOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("contracts, which the trace does not follow");
}

// Losses sum over positions (they read them in any order, or merged into rows).
OpShardingRule SoftmaxCrossEntropyOp::getShardingRule() {
  return dtc::sharding::lossRule(*this, 0, true, false);
}
void SoftmaxCrossEntropyOp::traceSequence(SequenceTrace&) {}

OpShardingRule NllLossOp::getShardingRule() {
  return dtc::sharding::lossRule(*this, 0, true, false, getWeight(), getPerRow());
}
void NllLossOp::traceSequence(SequenceTrace&) {}

OpShardingRule LabelFractionOp::getShardingRule() {
  return dtc::sharding::lossRule(*this, 0, false, false, getWeight());
}
void LabelFractionOp::traceSequence(SequenceTrace&) {}

OpShardingRule MseOp::getShardingRule() { return dtc::sharding::lossRule(*this, 0, false, false); }
void MseOp::traceSequence(SequenceTrace&) {}

// A loss's gradient has a value at each position its loss read.
OpShardingRule SoftmaxCrossEntropyGradOp::getShardingRule() {
  return dtc::sharding::lossRule(*this, 1, true, true);
}
void SoftmaxCrossEntropyGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

OpShardingRule NllLossGradOp::getShardingRule() {
  // A per-row gradient's dloss has the rows' factor.
  RuleBuilder b(*this);
  SmallVector<int> fs = b.factors(2);
  fs.back() = -1;
  b.operandDims(0, getPerRow() ? ArrayRef<int>(fs).take_front(1) : ArrayRef<int>{})
      .operandDims(1, fs)
      .operandDims(2, ArrayRef<int>(fs).take_front(1))
      .resultDims(0, fs);
  return b.take();
}
void NllLossGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

OpShardingRule MseGradOp::getShardingRule() {
  return dtc::sharding::lossRule(*this, 1, false, true);
}
void MseGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}
