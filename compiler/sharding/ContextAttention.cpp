#include "sharding/ContextAttention.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace dtc::sharding {
namespace {

// The sequence dimension of attention's [..., T, D] operands.
int64_t sequenceDim(Value v) { return cast<RankedTensorType>(v.getType()).getRank() - 2; }

Value gatheredBlock(Value v, ArrayAttr axes) {
  auto gather = v.getDefiningOp<dist::AllGatherOp>();
  if (!gather || gather.getAxes() != axes ||
      static_cast<int64_t>(gather.getDim()) != sequenceDim(v))
    return {};
  return gather.getX();
}

}  // namespace

FailureOr<std::pair<Value, Value>> keyValueBlocks(Operation* op, Value k, Value v, ArrayAttr axes,
                                                  StringRef method) {
  Value kBlock = gatheredBlock(k, axes), vBlock = gatheredBlock(v, axes);
  if (!kBlock || !vBlock)
    return op->emitOpError() << method << " needs its keys and values gathered over " << axes
                             << " along the sequence";
  return std::make_pair(kBlock, vBlock);
}

FailureOr<SmallVector<dist::ReduceScatterOp>> sequenceScatters(Operation* op, Value grad,
                                                               ArrayAttr axes, StringRef method) {
  SmallVector<dist::ReduceScatterOp> found;
  for (Operation* user : grad.getUsers()) {
    auto scatter = dyn_cast<dist::ReduceScatterOp>(user);
    if (!scatter || scatter.getAxes() != axes ||
        static_cast<int64_t>(scatter.getDim()) != sequenceDim(grad))
      return op->emitOpError() << method
                               << " needs its key and value gradients reduce-scattered over "
                               << axes << " along the sequence, found " << user->getName();
    found.push_back(scatter);
  }
  return found;
}

void copyAttributes(Operation* from, Operation* to, bool all) {
  for (NamedAttribute attr : from->getDiscardableAttrs())
    if (attr.getName() != dist::kShardingsAttr && (all || attr.getName().getValue().contains('.')))
      to->setAttr(attr.getName(), attr.getValue());
}

void eraseIfDead(Value value) {
  if (Operation* def = value.getDefiningOp(); def && def->use_empty()) def->erase();
}

}  // namespace dtc::sharding
