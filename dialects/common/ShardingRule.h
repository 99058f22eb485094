// Factor-based sharding rules of ops (in the style of OpenXLA Shardy's OpShardingRule). Every
// dimension of every operand and result belongs to a factor (an index space of the op's
// computation) or to none (-1: the op needs that dimension whole). Sharding a factor over mesh
// axes shards every dimension that belongs to it. A factor of the operands that a result lacks is
// either summed over for that result (`summed`: sharding it leaves the result partial over its
// axes) or one the result does not depend on (it comes out whole on every device). Rules only
// give a dimension a factor when one of the two holds, so -1 also marks the non-linear reductions
// (softmax rows, normalisation statistics).
//
// Each op gives its own rule (ShardingRuleOpInterface, implemented beside the op); the builder
// and the rules many ops share are here.
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

namespace dtc::sharding {

struct OpShardingRule {
  int numFactors = 0;
  llvm::SmallVector<llvm::SmallVector<int>> operands;  // [operand][dim] -> factor or -1
  llvm::SmallVector<llvm::SmallVector<int>> results;   // [result][dim] -> factor or -1
  llvm::SmallVector<llvm::SmallVector<int>> summed;    // [result] -> factors summed into it
  llvm::SmallVector<llvm::SmallVector<int>> maxed;     // [result] -> factors maximised over
  // A dimension holds `mult` copies of its factor's index space, one after another (split's
  // operand along the split axis: one per piece). A factor cut into k chunks cuts such a
  // dimension into k·mult chunks. 1 everywhere else.
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandMult, resultMult;
  // Factors that cannot be chunked (a reshape merging or splitting dimensions).
  llvm::SmallVector<bool> plainOnly;
};

// Builds an op's rule: factors are numbered as they are made, dimensions default to none.
class RuleBuilder {
 public:
  explicit RuleBuilder(mlir::Operation* op);

  int factor() { return rule_.numFactors++; }
  llvm::SmallVector<int> factors(int n);
  RuleBuilder& operand(unsigned i, int64_t dim, int f) { return set(rule_.operands[i], dim, f); }
  RuleBuilder& result(unsigned i, int64_t dim, int f) { return set(rule_.results[i], dim, f); }
  // Dimensions [0, fs.size()) of operand/result i get factors fs.
  RuleBuilder& operandDims(unsigned i, llvm::ArrayRef<int> fs);
  RuleBuilder& resultDims(unsigned i, llvm::ArrayRef<int> fs);
  RuleBuilder& operandMult(unsigned i, int64_t dim, int64_t m);
  RuleBuilder& resultMult(unsigned i, int64_t dim, int64_t m);
  // Result i is the maximum over factor f (which it lacks), not a sum.
  RuleBuilder& maximised(unsigned i, int f);
  // Factor f cannot be chunked.
  RuleBuilder& plainOnly(int f);
  // Result i does not depend on factor f (which it lacks): not a sum over it.
  RuleBuilder& independent(unsigned i, int f);
  // By default a result sums over every operand factor it lacks.
  OpShardingRule take();

 private:
  RuleBuilder& set(llvm::SmallVector<int>& dims, int64_t dim, int f);
  OpShardingRule rule_;
  llvm::SmallVector<std::pair<unsigned, int>> independent_, maxed_;
  llvm::SmallVector<int> plain_;
};

// Every operand and result has the same shape (rank-0 operands, such as AdamW's step, excepted):
// one factor per dimension.
OpShardingRule elementwiseRule(mlir::Operation* op);

// NumPy broadcasting: a result dimension's factor reaches the right-aligned operand dimensions
// that are not broadcast (size 1 against a larger result).
OpShardingRule broadcastingRule(mlir::Operation* op);

// Losses from operand `first` on: every operand dimension is summed into the scalar, except the
// class dimension of cross-entropy (`classDim`: the softmax needs whole rows). Class weights
// (`weight`, [C]) stay whole; a gradient's result has the operands' factors (`isGrad`), a
// per-row loss's result the rows' (`perRow`).
OpShardingRule lossRule(mlir::Operation* op, unsigned first, bool classDim, bool isGrad,
                        mlir::Value weight = mlir::Value(), bool perRow = false);

// op(lhs) · op(rhs) over `batchDims` leading batch dimensions, op = identity or transpose.
OpShardingRule matmulRule(mlir::Operation* op, bool transposeLhs, bool transposeRhs,
                          int64_t batchDims);

// Ops that need the last `whole` dimensions of their main operands whole (row statistics):
// leading dimensions are shared by every operand and result of at least that rank.
OpShardingRule leadingRule(mlir::Operation* op, int64_t rank, int64_t whole);

// The factors of logits [..., V]: the rows' and the class's.
llvm::SmallVector<int> withClass(llvm::ArrayRef<int> rows, int classes);

}  // namespace dtc::sharding
