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

bool isIdentity(ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

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
      // scores = q·kᵀ used only here, perhaps scaled on its own first (an export's division by
      // √d); probabilities used only by probabilities·v.
      Value x = softmax.getX();
      auto preScale = x.getDefiningOp<graph::ScaleOp>();
      if (preScale && preScale->hasOneUse())
        x = preScale.getX();
      else
        preScale = nullptr;
      auto scores = x.getDefiningOp<graph::BatchMatmulOp>();
      if (!scores || scores.getTransposeLhs() || !scores->hasOneUse() || !softmax->hasOneUse())
        continue;
      // kᵀ as the product's flag, or as a transpose feeding only it whose last two dimensions
      // are k's swapped (an export's q @ k.transpose(-2, -1), perhaps merged with the transpose
      // into heads before it): k is that transpose with the last two swapped back.
      Value k = scores.getRhs();
      graph::TransposeOp keyTranspose;
      SmallVector<int64_t> keyPerm;
      if (!scores.getTransposeRhs()) {
        keyTranspose = k.getDefiningOp<graph::TransposeOp>();
        if (!keyTranspose || !keyTranspose->hasOneUse() || keyTranspose.getPerm().size() < 2)
          continue;
        keyPerm.assign(keyTranspose.getPerm().begin(), keyTranspose.getPerm().end());
        std::swap(keyPerm[keyPerm.size() - 1], keyPerm[keyPerm.size() - 2]);
      }
      auto context = dyn_cast<graph::BatchMatmulOp>(*softmax->user_begin());
      if (!context || context.getLhs() != softmax.getY() || context.getTransposeLhs() ||
          context.getTransposeRhs())
        continue;
      Value q = scores.getLhs(), v = context.getRhs();
      b.setInsertionPoint(context);
      graph::TransposeOp keyBack;
      if (keyTranspose && isIdentity(keyPerm))
        k = keyTranspose.getX();
      else if (keyTranspose)
        k = keyBack =
            graph::TransposeOp::create(b, keyTranspose.getLoc(), keyTranspose.getX(), keyPerm);
      if (q.getType() != k.getType() || q.getType() != v.getType()) {  // self-attention shapes
        if (keyBack) keyBack.erase();
        continue;
      }
      const float scale = softmax.getScale().convertToFloat() *
                          (preScale ? preScale.getFactor().convertToFloat() : 1.0f);
      auto fused =
          graph::CausalAttentionOp::create(b, context.getLoc(), q, k, v, b.getF32FloatAttr(scale));
      context.getResult().replaceAllUsesWith(fused.getOut());
      context.erase();
      softmax.erase();
      if (preScale) preScale.erase();
      scores.erase();
      if (keyTranspose) keyTranspose.erase();
    }
  }
};

}  // namespace
}  // namespace dtc
