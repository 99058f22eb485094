#include "sharding/SequenceDims.h"

#include "mlir/IR/BuiltinTypes.h"

#include "common/OpInterfaces.h"
#include "graph/IR/GraphDialect.h"

using namespace mlir;

namespace dtc::sharding {
namespace {

// One op: the operands a sequence reached, then what the op says it does with them.
void visit(SequenceFlow& flow, Operation* op) {
  SmallVector<SequenceTrace::Carried> carried;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (auto it = flow.dims.find(v); it != flow.dims.end())
      carried.push_back({static_cast<unsigned>(i), it->second});
  if (carried.empty()) return;
  auto known = dyn_cast<SequenceOpInterface>(op);
  if (!known) {
    flow.ordered.push_back({op, "is not known to keep positions apart"});
    return;
  }
  if (carried.front().dim == SequenceFlow::kMergedRows) {
    if (!known.sumsOverPositions())
      flow.ordered.push_back({op, "reads positions merged into rows"});
    return;
  }
  SequenceTrace trace(flow, op, carried);
  known.traceSequence(trace);
}

}  // namespace

SmallVector<std::pair<Value, int64_t>> sequenceInputs(func::FuncOp func, int64_t length) {
  SmallVector<std::pair<Value, int64_t>> inputs;
  for (BlockArgument arg : func.getArguments()) {
    const unsigned i = arg.getArgNumber();
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t dim = 0;
    if (auto bd = func.getArgAttrOfType<IntegerAttr>(i, attr::kBatchDim)) dim = bd.getInt();
    if (func.getArgAttr(i, attr::kData) && type.getRank() > dim + 1 &&
        type.getDimSize(dim + 1) == length)
      inputs.push_back({arg, dim + 1});
  }
  return inputs;
}

SequenceFlow traceSequence(func::FuncOp func, ArrayRef<std::pair<Value, int64_t>> inputs) {
  SequenceFlow flow;
  for (auto [v, d] : inputs) flow.dims[v] = d;
  for (Operation& op : func.getBody().front().without_terminator()) visit(flow, &op);
  return flow;
}

}  // namespace dtc::sharding
