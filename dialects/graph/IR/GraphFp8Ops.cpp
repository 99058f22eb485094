// FP8 training's ops: their verifiers, sharding rules and what they do to sequence positions.
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;
using namespace dtc::graph;

LogicalResult Fp8QuantizeOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getX());
  if (x.empty() || shapeOf(getQ()) != x)
    return emitOpError("q must have x's shape (at least one dimension)");
  if (cast<RankedTensorType>(getScaleInv().getType()).getNumElements() != 1)
    return emitOpError("scale_inv must be one float32");
  if (getQT().size() > 1) return emitOpError("at most one transposed copy");
  if (!getQT().empty()) {
    const int64_t cols = x.back(),
                  rows = cols > 0 ? cast<RankedTensorType>(getX().getType()).getNumElements() / cols
                                  : 0;
    if (shapeOf(getQT()[0]) != ArrayRef<int64_t>{cols, rows} ||
        elementOf(getQT()[0]) != elementOf(getQ()))
      return emitOpError("q_t must be x's transpose [") << cols << ", " << rows << "] in q's type";
  }
  return success();
}

LogicalResult Fp8GemmOp::verify() {
  ArrayRef<int64_t> a = shapeOf(getA()), b = shapeOf(getB()), out = shapeOf(getOut());
  if (a.size() != 2 || b.size() != 2 || a[1] != b[1])
    return emitOpError("a [M, K] and b [N, K] must share K");
  if (out != ArrayRef<int64_t>{a[0], b[0]}) return emitOpError("out must be [M, N]");
  if (isa<Float8E5M2Type>(elementOf(getA())) && isa<Float8E5M2Type>(elementOf(getB())))
    return emitOpError("a and b cannot both be e5m2");
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

// One scale over the whole tensor: no dimension splits without the amax agreeing across the
// ranks, which the partitioner does not insert; every operand is taken whole.
OpShardingRule Fp8QuantizeOp::getShardingRule() { return RuleBuilder(*this).take(); }
void Fp8QuantizeOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("takes one scale over every position");
}

OpShardingRule Fp8GemmOp::getShardingRule() { return RuleBuilder(*this).take(); }
void Fp8GemmOp::traceSequence(SequenceTrace& trace) { dtc::sharding::sequenceOverFeatures(trace); }
