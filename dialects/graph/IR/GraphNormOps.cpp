// The normalisations over the last dimension: shapes, 16-bit storage, gradients, sharding rules
// and what they do to sequence positions.
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;
using namespace dtc::graph;

std::optional<std::string> LayerNormOp::checkShapes(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                                                    ArrayRef<int64_t> b) {
  if (x.empty() || w.size() != 1 || b.size() != 1 || w[0] != x.back() || b[0] != x.back())
    return "layer_norm needs weight and bias of shape [" +
           (x.empty() ? std::string("?") : std::to_string(x.back())) + "], got " + shapeString(w) +
           " and " + shapeString(b) + " for input " + shapeString(x);
  return std::nullopt;
}

std::optional<std::string> RmsNormOp::checkShapes(ArrayRef<int64_t> x, ArrayRef<int64_t> w) {
  if (x.empty() || w.size() != 1 || w[0] != x.back())
    return "rms_norm needs a weight of shape [" +
           (x.empty() ? std::string("?") : std::to_string(x.back())) + "], got " + shapeString(w) +
           " for input " + shapeString(x);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  if (auto error = checkShapes(x, shapeOf(adaptor.getWeight()), shapeOf(adaptor.getBias())))
    return emitOptionalError(loc, *error);
  types.push_back(adaptor.getX().getType());
  types.append(2, f32Tensor(ctx, x.drop_back()));
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getX().getType());
  types.push_back(adaptor.getWeight().getType());
  types.push_back(adaptor.getWeight().getType());
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  if (auto error = checkShapes(x, shapeOf(adaptor.getWeight())))
    return emitOptionalError(loc, *error);
  types.push_back(f32Tensor(ctx, x));
  types.push_back(f32Tensor(ctx, x.drop_back()));
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location>,
                                              Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.push_back(f32Tensor(ctx, shapeOf(adaptor.getX())));
  types.push_back(adaptor.getWeight().getType());
  return success();
}

bool RmsNormOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return narrowableFirstResult(l, r);
}
bool RmsNormGradOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return narrowableFirstResult(l, r);
}

bool LayerNormOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return narrowableFirstResult(l, r);
}

//===----------------------------------------------------------------------===//
// 16-bit storage (LowPrecisionStorageOpInterface): the weights and statistics stay f32.
//===----------------------------------------------------------------------===//

bool LayerNormOp::widensOperand(unsigned) { return false; }
bool LayerNormOp::roundsResult(unsigned index) { return index == 0; }
bool LayerNormGradOp::widensOperand(unsigned index) { return index == 0; }
bool LayerNormGradOp::roundsResult(unsigned) { return false; }
bool RmsNormOp::widensOperand(unsigned index) { return index == 0; }
bool RmsNormOp::roundsResult(unsigned index) { return index == 0; }
bool RmsNormGradOp::widensOperand(unsigned index) { return index <= 1; }
bool RmsNormGradOp::roundsResult(unsigned index) { return index == 0; }

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

using Grads = FailureOr<SmallVector<Value>>;

Grads LayerNormOp::buildGradients(OpBuilder& b, ValueRange dys) {
  // mean and rstd are by-products for the backward pass; only y carries a gradient.
  if (!dys[0]) return SmallVector<Value>{Value(), Value(), Value()};
  auto grad =
      LayerNormGradOp::create(b, getLoc(), dys[0], getX(), getWeight(), getMean(), getRstd());
  return SmallVector<Value>{grad.getDx(), grad.getDweight(), grad.getDbias()};
}

Grads RmsNormOp::buildGradients(OpBuilder& b, ValueRange dys) {
  // rstd is a by-product for the backward pass; only y carries a gradient.
  if (!dys[0]) return SmallVector<Value>{Value(), Value()};
  auto grad = RmsNormGradOp::create(b, getLoc(), dys[0], getX(), getWeight(), getRstd());
  return SmallVector<Value>{grad.getDx(), grad.getDweight()};
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

OpShardingRule LayerNormOp::getShardingRule() {
  // Rows lead; the normalised dimension stays whole.
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getX()) - 1);
  b.operandDims(0, rows).resultDims(0, rows).resultDims(1, rows).resultDims(2, rows);
  return b.take();
}
void LayerNormOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceOverFeatures(trace);
}

OpShardingRule LayerNormGradOp::getShardingRule() {
  // Weight and bias gradients take no row factor: partial when rows are sharded.
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getX()) - 1);
  b.operandDims(0, rows).operandDims(1, rows).operandDims(3, rows).operandDims(4, rows);
  b.resultDims(0, rows);
  return b.take();
}
void LayerNormGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

OpShardingRule RmsNormOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getX()) - 1);
  b.operandDims(0, rows).resultDims(0, rows).resultDims(1, rows);
  return b.take();
}
void RmsNormOp::traceSequence(SequenceTrace& trace) { dtc::sharding::sequenceOverFeatures(trace); }

OpShardingRule RmsNormGradOp::getShardingRule() {
  // The weight's gradient takes no row factor: partial when rows are sharded.
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getX()) - 1);
  b.operandDims(0, rows).operandDims(1, rows).operandDims(3, rows).resultDims(0, rows);
  return b.take();
}
void RmsNormGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}
