// Shape inference of the cut cross-entropy ops: logits [..., V] hold a row per leading index
// (rows [B·T] or [B, T]: the loss does not care how they are laid); per-row values are [...].
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;
using namespace dtc::graph;

namespace {

LogicalResult checkRows(std::optional<Location> loc, Value logits, ValueRange perRow) {
  ArrayRef<int64_t> l = shapeOf(logits);
  if (l.size() < 2)
    return emitOptionalError(loc, "logits must be [..., rows, classes], got ", shapeString(l));
  for (Value v : perRow)
    if (shapeOf(v) != l.drop_back())
      return emitOptionalError(loc, "per-row operands must be ", shapeString(l.drop_back()),
                               ", got ", shapeString(shapeOf(v)));
  return success();
}

}  // namespace

LogicalResult CrossEntropyRowMaxOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type>& types) {
  if (failed(checkRows(loc, adaptor.getLogits(), {}))) return failure();
  types.push_back(f32Tensor(ctx, shapeOf(adaptor.getLogits()).drop_back()));
  return success();
}

LogicalResult CrossEntropyPartsOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                    Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (failed(checkRows(loc, adaptor.getLogits(), {adaptor.getLabels(), adaptor.getRowMax()})))
    return failure();
  types.append(2, f32Tensor(ctx, shapeOf(adaptor.getLogits()).drop_back()));
  return success();
}

LogicalResult CrossEntropyCombineOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> m = shapeOf(adaptor.getRowMax());
  if (m.empty() || shapeOf(adaptor.getSumExp()) != m || shapeOf(adaptor.getTarget()) != m)
    return emitOptionalError(loc, "row_max, sum_exp and target must have one equal shape of rows");
  if (adaptor.getLabels() && shapeOf(adaptor.getLabels()) != m)
    return emitOptionalError(loc, "labels must be shaped as the rows, ", shapeString(m));
  types.push_back(f32Tensor(ctx, {}));
  return success();
}

LogicalResult CrossEntropyPartsGradOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                                        Adaptor adaptor,
                                                        SmallVectorImpl<Type>& types) {
  if (failed(checkRows(loc, adaptor.getLogits(),
                       {adaptor.getLabels(), adaptor.getRowMax(), adaptor.getSumExp()})))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;
using dtc::sharding::withClass;

OpShardingRule CrossEntropyRowMaxOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getLogits()) - 1);
  int v = b.factor();
  b.operandDims(0, withClass(rows, v)).resultDims(0, rows).maximised(0, v);
  return b.take();
}
void CrossEntropyRowMaxOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("reduces rows, which the trace does not follow");
}

OpShardingRule CrossEntropyPartsOp::getShardingRule() {
  // Both results are sums over the vocabulary (the target is 0 off the label's block).
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getLogits()) - 1);
  int v = b.factor();
  b.operandDims(0, withClass(rows, v)).operandDims(1, rows).operandDims(2, rows);
  b.resultDims(0, rows).resultDims(1, rows);
  return b.take();
}
void CrossEntropyPartsOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("reduces rows, which the trace does not follow");
}

OpShardingRule CrossEntropyCombineOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getRowMax()));
  b.operandDims(0, rows).operandDims(1, rows).operandDims(2, rows);
  if (getLabels()) b.operandDims(3, rows);
  return b.take();
}
void CrossEntropyCombineOp::traceSequence(SequenceTrace&) {}  // the mean over every row

OpShardingRule CrossEntropyPartsGradOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getLogits()) - 1);
  int v = b.factor();
  SmallVector<int> logits = withClass(rows, v);
  b.operandDims(1, logits).operandDims(2, rows).operandDims(3, rows).operandDims(4, rows);
  b.resultDims(0, logits);
  return b.take();
}
void CrossEntropyPartsGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}
