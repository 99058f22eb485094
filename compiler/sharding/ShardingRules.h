// The sharding rule of an op, as the op gives it (common/ShardingRule.h: what a rule is;
// ShardingRuleOpInterface: each op's own, implemented beside the op).
#pragma once

#include "common/ShardingRule.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

namespace dtc::sharding {

// The rule of `op`; failure (with an error on `op`) if it has none.
mlir::FailureOr<OpShardingRule> getShardingRule(mlir::Operation* op);

}  // namespace dtc::sharding
