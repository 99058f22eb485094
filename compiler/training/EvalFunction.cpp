// @forward -> @eval: the model in inference mode (PyTorch's model.eval()).
#include "Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_EVALFUNCTION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct EvalFunctionPass : impl::EvalFunctionBase<EvalFunctionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(fn::kForward);
    if (!forward) {
      module.emitError("dtc-eval-function: the module has no @forward function");
      return signalPassFailure();
    }
    forward.setSymName("eval");

    // Results that update buffers are training-only.
    auto ret = cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    SmallVector<Value> kept;
    SmallVector<DictionaryAttr> keptAttrs;
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (!forward.getResultAttr(i, attr::kUpdates)) {
        kept.push_back(v);
        keptAttrs.push_back(forward.getResultAttrDict(i));
      }
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc(), kept);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : kept) types.push_back(v.getType());
    forward.setType(FunctionType::get(&getContext(), forward.getArgumentTypes(), types));
    forward.setAllResultAttrs(keptAttrs);

    // Batch statistics -> running statistics.
    SmallVector<graph::BatchNormTrainOp> norms;
    forward.walk([&](graph::BatchNormTrainOp op) { norms.push_back(op); });
    for (graph::BatchNormTrainOp op : norms) {
      b.setInsertionPoint(op);
      Value y =
          graph::BatchNormEvalOp::create(b, op.getLoc(), op.getX(), op.getWeight(), op.getBias(),
                                         op.getRunningMean(), op.getRunningVar(), op.getEpsAttr());
      op.getY().replaceAllUsesWith(y);
      if (!op->use_empty()) {
        op.emitError("dtc-eval-function: batch statistics are used beyond the normalised output");
        return signalPassFailure();
      }
      op.erase();
    }

    // Dropout is the identity in evaluation.
    SmallVector<graph::DropoutOp> dropouts;
    forward.walk([&](graph::DropoutOp op) { dropouts.push_back(op); });
    for (graph::DropoutOp op : dropouts) {
      op.getY().replaceAllUsesWith(op.getX());
      op.erase();
    }
  }
};

}  // namespace
}  // namespace dtc
