#include "sharding/ShardingRules.h"

#include "common/OpInterfaces.h"

using namespace mlir;

namespace dtc::sharding {

FailureOr<OpShardingRule> getShardingRule(Operation* op) {
  if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op)) return ruled.getShardingRule();
  return op->emitOpError("has no sharding rule");
}

}  // namespace dtc::sharding
