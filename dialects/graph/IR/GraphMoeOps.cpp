// Shape rules, verifiers and gradient rules of the mixture-of-experts ops (GraphMoeOps.td).
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

#include <algorithm>
#include <cmath>

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace dtc::graph;

namespace dtc::graph {

std::optional<std::string> checkMoeRouting(int64_t experts, int64_t topK, double capacityFactor) {
  if (experts < 1)
    return "a mixture of experts needs at least one expert, got " + std::to_string(experts);
  if (topK < 1 || topK > experts)
    return "top-k " + std::to_string(topK) + " must be in [1, " + std::to_string(experts) +
           "] (the number of experts)";
  if (!(capacityFactor > 0))
    return "capacity factor must be > 0, got " + llvm::formatv("{0}", capacityFactor).str();
  return std::nullopt;
}

int64_t moeCapacity(int64_t tokens, int64_t experts, int64_t topK, double capacityFactor) {
  // GShard's ceil(factor · tokens · k / E); no expert can take more than every token once.
  const double wanted =
      std::ceil(capacityFactor * static_cast<double>(tokens * topK) / static_cast<double>(experts));
  return std::max<int64_t>(1, std::min<int64_t>(tokens, static_cast<int64_t>(wanted)));
}

}  // namespace dtc::graph

namespace {

RankedTensorType i64Tensor(MLIRContext* ctx, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, IntegerType::get(ctx, 64));
}

// expert and slot [G, S, K] of one shape, whose G and S are those of `tokens` [G, S, ...].
LogicalResult checkChoices(std::optional<Location> loc, StringRef op, ArrayRef<int64_t> tokens,
                           ArrayRef<int64_t> expert, ArrayRef<int64_t> slot) {
  if (expert.size() != 3 || slot != expert || tokens.size() < 2 ||
      expert.take_front(2) != tokens.take_front(2))
    return emitOptionalError(
        loc, op, " needs expert and slot [G, S, K] for tokens [G, S, ...], got ",
        shapeString(expert), " and ", shapeString(slot), " for ", shapeString(tokens));
  return success();
}

}  // namespace

LogicalResult MoeRouteOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> scores = shapeOf(adaptor.getScores());
  const int64_t k = adaptor.getTopK(), capacity = adaptor.getCapacity();
  if (scores.size() != 3)
    return emitOptionalError(loc, "moe_route needs scores [G, S, E], got ", shapeString(scores));
  if (auto error = checkMoeRouting(scores[2], k, 1.0)) return emitOptionalError(loc, *error);
  if (capacity < 1 || capacity > scores[1])
    return emitOptionalError(loc, "moe_route: capacity ", capacity, " must be in [1, ", scores[1],
                             "] (the tokens of a group)");
  SmallVector<int64_t> choices{scores[0], scores[1], k};
  types.push_back(i64Tensor(ctx, choices));
  types.push_back(i64Tensor(ctx, choices));
  types.push_back(f32Tensor(ctx, choices));
  types.push_back(adaptor.getScores().getType());
  return success();
}

LogicalResult MoeRouteGradOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> dweight = shapeOf(adaptor.getDweight()), expert = shapeOf(adaptor.getExpert());
  if (dweight != expert || shapeOf(adaptor.getScores()).size() != 3)
    return emitOptionalError(loc, "moe_route_grad: dweight ", shapeString(dweight),
                             " must match expert ", shapeString(expert));
  types.push_back(adaptor.getScores().getType());
  return success();
}

LogicalResult MoeDispatchOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getX()), buffer = shapeOf(getBuffer());
  if (x.size() != 3 || buffer.size() != 4 || buffer[1] != x[0] || buffer[3] != x[2])
    return emitOpError("needs x [G, S, D] and a buffer [E, G, C, D], got ")
           << shapeString(x) << " and " << shapeString(buffer);
  return checkChoices(getLoc(), "moe_dispatch", x, shapeOf(getExpert()), shapeOf(getSlot()));
}

LogicalResult MoeDispatchGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> dbuffer = shapeOf(adaptor.getDbuffer()), expert = shapeOf(adaptor.getExpert());
  if (dbuffer.size() != 4 || expert.size() != 3 || expert[0] != dbuffer[1])
    return emitOptionalError(loc,
                             "moe_dispatch_grad needs dbuffer [E, G, C, D] and expert "
                             "[G, S, K], got ",
                             shapeString(dbuffer), " and ", shapeString(expert));
  types.push_back(f32Tensor(ctx, {expert[0], expert[1], dbuffer[3]}));
  return success();
}

LogicalResult MoeCombineOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> buffer = shapeOf(adaptor.getBuffer()), expert = shapeOf(adaptor.getExpert());
  if (buffer.size() != 4 || expert.size() != 3 || expert[0] != buffer[1] ||
      shapeOf(adaptor.getWeight()) != expert)
    return emitOptionalError(loc,
                             "moe_combine needs a buffer [E, G, C, D] and expert, slot and "
                             "weight [G, S, K], got ",
                             shapeString(buffer), " and ", shapeString(expert));
  types.push_back(f32Tensor(ctx, {expert[0], expert[1], buffer[3]}));
  return success();
}

LogicalResult MoeCombineGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                 Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getBuffer().getType());
  types.push_back(adaptor.getWeight().getType());
  return success();
}

LogicalResult LogSumExpOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  if (x.empty()) return emitOptionalError(loc, "logsumexp needs a tensor of rank >= 1");
  types.push_back(f32Tensor(ctx, x.drop_back()));
  return success();
}

LogicalResult LogSumExpGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getX().getType());
  return success();
}

// ---- Gradient rules. Routing's indices carry none; only the weights lead back to the scores.

using Grads = FailureOr<SmallVector<Value>>;

Grads MoeRouteOp::buildGradients(OpBuilder& b, ValueRange dys) {
  // The load is a count (Switch's f, no gradient); expert and slot are indices.
  if (!dys[2]) return SmallVector<Value>{Value()};
  Value dscores =
      MoeRouteGradOp::create(b, getLoc(), dys[2], getScores(), getExpert(), getNormalize());
  return SmallVector<Value>{dscores};
}

Grads MoeDispatchOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dx = MoeDispatchGradOp::create(b, getLoc(), dys[0], getExpert(), getSlot());
  return SmallVector<Value>{dx, Value(), Value()};
}

Grads MoeCombineOp::buildGradients(OpBuilder& b, ValueRange dys) {
  auto grad = MoeCombineGradOp::create(b, getLoc(), dys[0], getBuffer(), getExpert(), getSlot(),
                                       getWeight());
  return SmallVector<Value>{grad.getDbuffer(), Value(), Value(), grad.getDweight()};
}

Grads LogSumExpOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{LogSumExpGradOp::create(b, getLoc(), dys[0], getX(), getY())};
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

namespace {

// Routing: groups split freely; a group's slots are handed out in token order and a token ranks
// every expert, so S and E stay whole.
OpShardingRule routeRule(Operation* op) {
  RuleBuilder b(op);
  int g = b.factor();
  for (unsigned i = 0; i < op->getNumOperands(); ++i) b.operand(i, 0, g);
  for (unsigned i = 0; i < op->getNumResults(); ++i) b.result(i, 0, g);
  return b.take();
}

// The token-moving ops: tokens [G, S, D] (expert, slot and weight [G, S, K]) against the
// experts' buffer [E, G, C, D]. Groups and the width split freely; E and C stay whole (each
// expert's slots are filled from every token of its group), S and K too. `choices`: the
// operands and results that hold per-choice values (indices and weights: groups only).
OpShardingRule tokensRule(Operation* op, ArrayRef<Value> choices) {
  RuleBuilder b(op);
  int g = b.factor(), d = b.factor();
  auto dims = [&](Value v) -> SmallVector<int> {
    if (rankOf(v) == 4) return {-1, g, -1, d};
    if (isa<IntegerType>(elementOf(v)) || llvm::is_contained(choices, v)) return {g, -1, -1};
    return {g, -1, d};
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands())) b.operandDims(i, dims(v));
  for (auto [i, v] : llvm::enumerate(op->getResults())) b.resultDims(i, dims(v));
  return b.take();
}

// Capacity is filled in token order: a reordered sequence would drop other tokens.
void capacitySequence(SequenceTrace& trace) {
  trace.ordered("fills its experts' capacity in token order");
}

}  // namespace

OpShardingRule MoeRouteOp::getShardingRule() { return routeRule(*this); }
void MoeRouteOp::traceSequence(SequenceTrace& trace) { capacitySequence(trace); }
OpShardingRule MoeRouteGradOp::getShardingRule() { return routeRule(*this); }
void MoeRouteGradOp::traceSequence(SequenceTrace& trace) { capacitySequence(trace); }
OpShardingRule MoeDispatchOp::getShardingRule() { return tokensRule(*this, {}); }
void MoeDispatchOp::traceSequence(SequenceTrace& trace) { capacitySequence(trace); }
OpShardingRule MoeDispatchGradOp::getShardingRule() { return tokensRule(*this, {}); }
void MoeDispatchGradOp::traceSequence(SequenceTrace& trace) { capacitySequence(trace); }
OpShardingRule MoeCombineOp::getShardingRule() { return tokensRule(*this, {getWeight()}); }
void MoeCombineOp::traceSequence(SequenceTrace& trace) { capacitySequence(trace); }
OpShardingRule MoeCombineGradOp::getShardingRule() {
  return tokensRule(*this, {getWeight(), getDweight()});
}
void MoeCombineGradOp::traceSequence(SequenceTrace& trace) { capacitySequence(trace); }

// Log-sum-exp over the last dimension: rows split freely; a row's log-sum-exp needs the whole
// row.
OpShardingRule LogSumExpOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getResult()));
  for (unsigned i = 0; i < getOperation()->getNumOperands(); ++i) b.operandDims(i, rows);
  b.resultDims(0, rows);
  return b.take();
}
void LogSumExpOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("reduces rows, which the trace does not follow");
}
OpShardingRule LogSumExpGradOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> rows = b.factors(rankOf(getResult()) - 1);
  for (unsigned i = 0; i < getOperation()->getNumOperands(); ++i) b.operandDims(i, rows);
  b.resultDims(0, rows);
  return b.take();
}
void LogSumExpGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}
