#include "sharding/ContextAttention.h"

#include "mlir/IR/BuiltinTypes.h"

#include "graph/IR/GraphOps.h"

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

LogicalResult findScatters(Operation* op, Value grad, ArrayAttr axes, StringRef method,
                           SmallVector<dist::ReduceScatterOp>& found) {
  for (Operation* user : grad.getUsers()) {
    auto scatter = dyn_cast<dist::ReduceScatterOp>(user);
    if (!scatter || scatter.getAxes() != axes ||
        static_cast<int64_t>(scatter.getDim()) != sequenceDim(grad))
      return op->emitOpError() << method
                               << " needs its key and value gradients reduce-scattered over "
                               << axes << " along the sequence, found " << user->getName();
    found.push_back(scatter);
  }
  return success();
}

// The gathered keys and values an attention op reads.
std::pair<Value, Value> keysAndValues(Operation* op) {
  if (auto grad = dyn_cast<graph::CausalAttentionGradOp>(op)) return {grad.getK(), grad.getV()};
  auto forward = cast<graph::CausalAttentionOp>(op);
  return {forward.getK(), forward.getV()};
}

void eraseIfDead(Value value) {
  if (Operation* def = value.getDefiningOp(); def && def->use_empty()) def->erase();
}

}  // namespace

SmallVector<Operation*> splitAttention(Operation* root) {
  SmallVector<Operation*> found;
  root->walk([&](Operation* op) {
    if (isa<graph::CausalAttentionOp, graph::CausalAttentionGradOp>(op) && op->hasAttr("seq_axes"))
      found.push_back(op);
  });
  return found;
}

FailureOr<SplitAttention> readSplitAttention(Operation* op, StringRef method) {
  SplitAttention a;
  a.op = op;
  a.axes = op->getAttrOfType<ArrayAttr>("seq_axes");
  auto [k, v] = keysAndValues(op);
  a.keys = gatheredBlock(k, a.axes);
  a.values = gatheredBlock(v, a.axes);
  if (!a.keys || !a.values)
    return op->emitOpError() << method << " needs its keys and values gathered over " << a.axes
                             << " along the sequence";
  if (auto grad = dyn_cast<graph::CausalAttentionGradOp>(op))
    if (failed(findScatters(op, grad.getDk(), a.axes, method, a.keyScatters)) ||
        failed(findScatters(op, grad.getDv(), a.axes, method, a.valueScatters)))
      return failure();
  return a;
}

void replaceSplitAttention(const SplitAttention& a, ValueRange results) {
  auto [keys, values] = keysAndValues(a.op);
  if (isa<graph::CausalAttentionGradOp>(a.op)) {
    a.op->getResult(0).replaceAllUsesWith(results[0]);
    for (auto [scatters, sum] :
         {std::make_pair(&a.keyScatters, results[1]), std::make_pair(&a.valueScatters, results[2])})
      for (dist::ReduceScatterOp scatter : *scatters) {
        scatter.getResult().replaceAllUsesWith(sum);
        scatter->erase();
      }
  } else {
    a.op->replaceAllUsesWith(results);
  }
  a.op->erase();
  eraseIfDead(keys);
  if (values != keys) eraseIfDead(values);
}

void copyAttributes(Operation* from, Operation* to, bool all) {
  for (NamedAttribute attr : from->getDiscardableAttrs())
    if (attr.getName() != dist::kShardingsAttr && (all || attr.getName().getValue().contains('.')))
      to->setAttr(attr.getName(), attr.getValue());
}

}  // namespace dtc::sharding
