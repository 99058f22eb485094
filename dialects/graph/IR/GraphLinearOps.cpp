// Shape inference of linear, linear_grad_input, linear_grad_weight and the fused epilogues.
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;
using namespace dtc::graph;

std::optional<std::string> dtc::graph::checkLinear(ArrayRef<int64_t> x, ArrayRef<int64_t> weight) {
  if (x.size() < 2) return "linear input must have rank >= 2, got " + shapeString(x);
  if (weight.size() != 2) return "linear weight must be [out, in], got " + shapeString(weight);
  if (x.back() != weight[1])
    return "input " + shapeString(x) + " has " + std::to_string(x.back()) +
           " features, the weight " + shapeString(weight) + " takes " + std::to_string(weight[1]);
  return std::nullopt;
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX()), w = shapeOf(adaptor.getWeight());
  if (auto error = checkLinear(x, w)) return emitOptionalError(loc, *error);
  SmallVector<int64_t> y(x.drop_back());
  y.push_back(w[0]);
  mlir::Type element = contractionElement(adaptor.getX(), adaptor.getWeight());
  if (!element) return emitOptionalError(loc, "linear: operands of different element types");
  types.push_back(RankedTensorType::get(y, element));
  return success();
}

LogicalResult LinearGradInputOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> dy = shapeOf(adaptor.getDy()), w = shapeOf(adaptor.getWeight());
  if (dy.size() < 2 || w.size() != 2 || dy.back() != w[0])
    return emitOptionalError(loc, "linear_grad_input: dy ", shapeString(dy), " and weight ",
                             shapeString(w), " do not match");
  SmallVector<int64_t> dx(dy.drop_back());
  dx.push_back(w[1]);
  mlir::Type element = contractionElement(adaptor.getDy(), adaptor.getWeight());
  if (!element)
    return emitOptionalError(loc, "linear_grad_input: operands of different element types");
  types.push_back(RankedTensorType::get(dx, element));
  return success();
}

LogicalResult LinearGradWeightOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> dy = shapeOf(adaptor.getDy()), x = shapeOf(adaptor.getX());
  if (dy.size() < 2 || dy.drop_back() != x.drop_back())
    return emitOptionalError(loc, "linear_grad_weight: dy ", shapeString(dy), " and x ",
                             shapeString(x), " differ in their leading dimensions");
  mlir::Type element = contractionElement(adaptor.getDy(), adaptor.getX());
  if (!element)
    return emitOptionalError(loc, "linear_grad_weight: operands of different element types");
  types.push_back(RankedTensorType::get(SmallVector<int64_t>{dy.back(), x.back()}, element));
  return success();
}

bool LinearGradWeightOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return widenableResult(l, r);
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

namespace {

// Leading dimensions, out features N, in features K. linear: x[.., K] w[N, K] -> [.., N];
// grad_input: dy[.., N] w -> [.., K] (sums N); grad_weight: dy[.., N] x[.., K] -> [N, K] (sums
// the leading dimensions).
OpShardingRule linearRule(Operation* op) {
  RuleBuilder b(op);
  int64_t lead = rankOf(op->getOperand(0)) - 1;
  SmallVector<int> ls = b.factors(lead);
  int n = b.factor(), k = b.factor();
  auto with = [&](int last) {
    SmallVector<int> dims(ls);
    dims.push_back(last);
    return dims;
  };
  if (isa<LinearOp>(op))
    b.operandDims(0, with(k)).operandDims(1, {n, k}).resultDims(0, with(n));
  else if (isa<LinearGradInputOp>(op))
    b.operandDims(0, with(n)).operandDims(1, {n, k}).resultDims(0, with(k));
  else
    b.operandDims(0, with(n)).operandDims(1, with(k)).resultDims(0, {n, k});
  return b.take();
}

}  // namespace

OpShardingRule LinearOp::getShardingRule() { return linearRule(*this); }
void LinearOp::traceSequence(SequenceTrace& trace) { dtc::sharding::sequenceOverFeatures(trace); }
OpShardingRule LinearGradInputOp::getShardingRule() { return linearRule(*this); }
void LinearGradInputOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}
OpShardingRule LinearGradWeightOp::getShardingRule() { return linearRule(*this); }
// The weight's gradient sums over every row: the same in any order.
void LinearGradWeightOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

using Grads = FailureOr<SmallVector<Value>>;

Grads LinearOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dx = LinearGradInputOp::create(b, getLoc(), dys[0], getWeight());
  Value dw = LinearGradWeightOp::create(b, getLoc(), dys[0], getX());
  return SmallVector<Value>{dx, dw};
}
