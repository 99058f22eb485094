// dtc-sequence-order: the step reads its sequences load-balanced (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "FunctionAttrs.h"
#include "Locations.h"
#include "Passes.h"
#include "graph/IR/GraphOps.h"
#include "sharding/SequenceDims.h"

namespace dtc {
#define GEN_PASS_DEF_SEQUENCEORDER
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct SequenceOrderPass : public impl::SequenceOrderBase<SequenceOrderPass> {
  using SequenceOrderBase::SequenceOrderBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(reorder(func))) return signalPassFailure();
  }

  LogicalResult reorder(func::FuncOp func) {
    int64_t context = 0;
    func.walk([&](graph::CausalAttentionOp op) {
      auto q = cast<RankedTensorType>(op.getQ().getType());
      context = q.getDimSize(q.getRank() - 2);
    });
    if (!context) return success();  // dtc-context-parallel says what is missing
    if (chunks < 2 || chunks % 2 != 0 || context % chunks != 0)
      return func.emitError("the context length ")
             << context << " does not split into 2·cp = " << static_cast<int64_t>(chunks)
             << " equal chunks (load-balanced context parallelism; --no-cp-load-balance needs it "
                "to divide over cp only)";
    sharding::SequenceFlow flow =
        sharding::traceSequence(func, sharding::sequenceInputs(func, context));
    const char* remedy = "; compile with --no-cp-load-balance";
    for (auto& [op, why] : flow.ordered)
      return op->emitError("load-balanced context parallelism reorders the sequence, but '")
             << locationName(op->getLoc()) << "' (" << op->getName() << ") " << why << remedy;
    // The first such dropout in program order, so the message names the same one every time.
    for (Operation& op : func.getBody().front()) {
      auto dropout = dyn_cast<graph::DropoutOp>(op);
      if (dropout && flow.dims.count(dropout.getY()) && dropout.getRatio().convertToFloat() > 0)
        return dropout.emitError("dropout '")
               << locationName(dropout.getLoc())
               << "' would draw other masks than one device on a load-balanced sequence" << remedy;
    }
    OpBuilder b(func.getContext());
    b.setInsertionPointToStart(&func.getBody().front());
    for (const sharding::SequenceFlow::PositionTable& t : flow.tables) {
      auto arg = dyn_cast<BlockArgument>(t.value);
      auto type = cast<RankedTensorType>(t.value.getType());
      if (!arg || type.getDimSize(t.dim) != context)
        return func.emitError("load-balanced context parallelism reorders the sequence, but a ")
               << type << " value computed in the model is indexed by position"
               << (arg ? " over another length" : "") << remedy;
      // The table's rows in the load-balanced order: chunk i next to chunk N−1−i.
      auto pieces = graph::SplitOp::create(b, arg.getLoc(), arg, b.getI64IntegerAttr(t.dim),
                                           b.getI64IntegerAttr(chunks), DenseI64ArrayAttr());
      SmallVector<Value> order;
      for (int64_t pair = 0; pair < chunks / 2; ++pair) {
        order.push_back(pieces->getResult(pair));
        order.push_back(pieces->getResult(chunks - 1 - pair));
      }
      auto balanced = graph::ConcatOp::create(b, arg.getLoc(), order, b.getI64IntegerAttr(t.dim));
      arg.replaceUsesWithIf(balanced.getResult(),
                            [&](OpOperand& use) { return use.getOwner() != pieces; });
    }
    return success();
  }
};

}  // namespace
}  // namespace dtc
