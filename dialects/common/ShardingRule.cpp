#include "common/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace dtc::sharding {
namespace {

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

}  // namespace

RuleBuilder::RuleBuilder(Operation* op) {
  rule_.operands.resize(op->getNumOperands());
  rule_.results.resize(op->getNumResults());
  rule_.operandMult.resize(op->getNumOperands());
  rule_.resultMult.resize(op->getNumResults());
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    rule_.operands[i].assign(rankOf(v), -1);
    rule_.operandMult[i].assign(rankOf(v), 1);
  }
  for (auto [i, v] : llvm::enumerate(op->getResults())) {
    rule_.results[i].assign(rankOf(v), -1);
    rule_.resultMult[i].assign(rankOf(v), 1);
  }
}

SmallVector<int> RuleBuilder::factors(int n) {
  SmallVector<int> f;
  for (int i = 0; i < n; ++i) f.push_back(factor());
  return f;
}

RuleBuilder& RuleBuilder::operandDims(unsigned i, ArrayRef<int> fs) {
  for (auto [d, f] : llvm::enumerate(fs)) operand(i, d, f);
  return *this;
}

RuleBuilder& RuleBuilder::resultDims(unsigned i, ArrayRef<int> fs) {
  for (auto [d, f] : llvm::enumerate(fs)) result(i, d, f);
  return *this;
}

RuleBuilder& RuleBuilder::operandMult(unsigned i, int64_t dim, int64_t m) {
  rule_.operandMult[i][dim] = m;
  return *this;
}

RuleBuilder& RuleBuilder::resultMult(unsigned i, int64_t dim, int64_t m) {
  rule_.resultMult[i][dim] = m;
  return *this;
}

RuleBuilder& RuleBuilder::maximised(unsigned i, int f) {
  maxed_.push_back({i, f});
  return *this;
}

RuleBuilder& RuleBuilder::plainOnly(int f) {
  plain_.push_back(f);
  return *this;
}

RuleBuilder& RuleBuilder::independent(unsigned i, int f) {
  independent_.push_back({i, f});
  return *this;
}

OpShardingRule RuleBuilder::take() {
  rule_.plainOnly.assign(rule_.numFactors, false);
  for (int f : plain_) rule_.plainOnly[f] = true;
  rule_.summed.assign(rule_.results.size(), {});
  rule_.maxed.assign(rule_.results.size(), {});
  for (unsigned i = 0; i < rule_.results.size(); ++i)
    for (int f = 0; f < rule_.numFactors; ++f) {
      bool inOperands = false;
      for (const auto& dims : rule_.operands) inOperands |= llvm::is_contained(dims, f);
      if (!inOperands || llvm::is_contained(rule_.results[i], f) ||
          llvm::is_contained(independent_, std::make_pair(i, f)))
        continue;
      (llvm::is_contained(maxed_, std::make_pair(i, f)) ? rule_.maxed : rule_.summed)[i].push_back(
          f);
    }
  return std::move(rule_);
}

RuleBuilder& RuleBuilder::set(SmallVector<int>& dims, int64_t dim, int f) {
  if (dim >= 0 && dim < static_cast<int64_t>(dims.size())) dims[dim] = f;
  return *this;
}

OpShardingRule elementwiseRule(Operation* op) {
  RuleBuilder b(op);
  int64_t rank = rankOf(op->getResult(0));
  SmallVector<int> fs = b.factors(rank);
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (rankOf(op->getOperand(i)) == rank) b.operandDims(i, fs);
  for (unsigned i = 0; i < op->getNumResults(); ++i) b.resultDims(i, fs);
  return b.take();
}

OpShardingRule broadcastingRule(Operation* op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  SmallVector<int> fs = b.factors(out.size());
  b.resultDims(0, fs);
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    ArrayRef<int64_t> in = shapeOf(op->getOperand(i));
    size_t lead = out.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] == out[lead + d]) b.operand(i, d, fs[lead + d]);
  }
  return b.take();
}

OpShardingRule lossRule(Operation* op, unsigned first, bool classDim, bool isGrad, Value weight,
                        bool perRow) {
  RuleBuilder b(op);
  int64_t rank = rankOf(op->getOperand(first));
  SmallVector<int> fs = b.factors(rank);
  if (classDim) fs.back() = -1;
  for (unsigned i = first; i < op->getNumOperands(); ++i)
    if (op->getOperand(i) != weight)
      b.operandDims(i, ArrayRef<int>(fs).take_front(rankOf(op->getOperand(i))));
  if (isGrad) b.resultDims(0, fs);
  if (perRow && !isGrad) b.resultDims(0, ArrayRef<int>(fs).take_front(rank - 1));
  return b.take();
}

OpShardingRule matmulRule(Operation* op, bool tA, bool tB, int64_t batchDims) {
  RuleBuilder b(op);
  SmallVector<int> batch = b.factors(batchDims);
  int m = b.factor(), n = b.factor(), k = b.factor();
  b.operandDims(0, batch).operandDims(1, batch).resultDims(0, batch);
  b.operand(0, batchDims + (tA ? 1 : 0), m).operand(0, batchDims + (tA ? 0 : 1), k);
  b.operand(1, batchDims + (tB ? 1 : 0), k).operand(1, batchDims + (tB ? 0 : 1), n);
  b.result(0, batchDims, m).result(0, batchDims + 1, n);
  return b.take();
}

OpShardingRule leadingRule(Operation* op, int64_t rank, int64_t whole) {
  RuleBuilder b(op);
  SmallVector<int> fs = b.factors(rank - whole);
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (rankOf(op->getOperand(i)) >= rank - whole) b.operandDims(i, fs);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    if (rankOf(op->getResult(i)) >= rank - whole) b.resultDims(i, fs);
  return b.take();
}

SmallVector<int> withClass(ArrayRef<int> rows, int classes) {
  SmallVector<int> dims(rows);
  dims.push_back(classes);
  return dims;
}

}  // namespace dtc::sharding
