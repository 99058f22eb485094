// Factor-based sharding rules of the graph ops (in the style of OpenXLA Shardy's
// OpShardingRule). Every dimension of every operand and result belongs to a factor (an index
// space of the op's computation) or to none (-1: the op needs that dimension whole). Sharding
// a factor over mesh axes shards every dimension that belongs to it. A factor of the operands
// that a result lacks is either summed over for that result (`summed`: sharding it leaves the
// result partial over its axes) or one the result does not depend on (it comes out whole on
// every device). Rules only give a dimension a factor when one of the two holds, so -1 also
// marks the non-linear reductions (softmax rows, normalisation statistics).
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

// The rule of `op`; failure (with an error on `op`) if it has none.
mlir::FailureOr<OpShardingRule> getShardingRule(mlir::Operation* op);

}  // namespace dtc::sharding
