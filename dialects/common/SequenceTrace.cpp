#include "common/SequenceTrace.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace dtc::sharding {
namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

}  // namespace

void SequenceTrace::table(Value v, int64_t dim) {
  for (const SequenceFlow::PositionTable& t : flow_.tables)
    if (t.value == v && t.dim == dim) return;
  flow_.tables.push_back({v, dim});
}

void sequenceThroughSameShape(SequenceTrace& trace) {
  Operation* op = trace.op();
  for (Value r : op->getResults())
    if (shapeOf(r) == shapeOf(op->getOperand(trace.operand()))) trace.set(r, trace.dim());
}

void sequenceOverFeatures(SequenceTrace& trace) {
  Operation* op = trace.op();
  const int64_t d = trace.dim();
  if (d >= rankOf(op->getOperand(0)) - 1 || trace.operand() != 0)
    return trace.ordered("mixes positions");
  for (Value r : op->getResults())
    if (rankOf(r) > d && shapeOf(r)[d] == shapeOf(op->getOperand(0))[d]) trace.set(r, d);
}

void sequenceBroadcasting(SequenceTrace& trace) {
  Operation* op = trace.op();
  const int64_t rank = rankOf(op->getResult(0));
  const unsigned first = trace.operand();
  const int64_t at = trace.dim() + rank - rankOf(op->getOperand(first));
  for (const SequenceTrace::Carried& c : trace.carried())
    if (c.dim + rank - rankOf(op->getOperand(c.operand)) != at)
      return trace.ordered("adds positions to other positions");
  for (Value v : op->getOperands()) {
    if (trace.reached(v)) continue;
    const int64_t aligned = at - (rank - rankOf(v));
    if (aligned >= 0 && shapeOf(v)[aligned] != 1) trace.table(v, aligned);
  }
  trace.set(op->getResult(0), at);
}

void sequenceStopsAtGradient(SequenceTrace& trace) {
  trace.ordered("is a gradient or an update (the trace follows the forward computation)");
}

}  // namespace dtc::sharding
