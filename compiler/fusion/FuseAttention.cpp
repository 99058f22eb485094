// dtc-fuse-attention: batch_matmul → causal_softmax → batch_matmul becomes causal_attention.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "Passes.h"
#include "graph/IR/GraphOps.h"
#include "plan/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(fn::kForward);
    if (!forward) {
      module.emitError("dtc-fuse-attention: the module has no @forward function");
      return signalPassFailure();
    }
    SmallVector<graph::CausalSoftmaxOp> softmaxes;
    forward.walk([&](graph::CausalSoftmaxOp op) { softmaxes.push_back(op); });
    OpBuilder b(module.getContext());
    for (graph::CausalSoftmaxOp softmax : softmaxes) {
      // scores = q·kᵀ used only here; probabilities used only by probabilities·v.
      auto scores = softmax.getX().getDefiningOp<graph::BatchMatmulOp>();
      if (!scores || scores.getTransposeLhs() || !scores.getTransposeRhs() ||
          !scores->hasOneUse() || !softmax->hasOneUse())
        continue;
      auto context = dyn_cast<graph::BatchMatmulOp>(*softmax->user_begin());
      if (!context || context.getLhs() != softmax.getY() || context.getTransposeLhs() ||
          context.getTransposeRhs())
        continue;
      Value q = scores.getLhs(), k = scores.getRhs(), v = context.getRhs();
      if (q.getType() != k.getType() || q.getType() != v.getType())
        continue;  // self-attention shapes
      b.setInsertionPoint(context);
      auto fused =
          graph::CausalAttentionOp::create(b, context.getLoc(), q, k, v, softmax.getScaleAttr());
      context.getResult().replaceAllUsesWith(fused.getOut());
      context.erase();
      softmax.erase();
      scores.erase();
    }
  }
};

}  // namespace
}  // namespace dtc
