// dtc-fuse-attention: batch_matmul → causal_softmax → batch_matmul becomes causal_attention.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "Passes.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

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

// Grouped-query attention's k (or v) before its repeat to every query head: `x` is
// reshape(broadcast(reshape(x0 [..., Hk, T, D] → [..., Hk, 1, T, D]) → [..., Hk, G, T, D]) →
// [..., Hk·G, T, D]); returns x0 and G (1 and x itself where x is no such repeat).
std::pair<Value, int64_t> beforeRepeat(Value x) {
  auto merge = x.getDefiningOp<graph::ReshapeOp>();
  if (!merge || !merge->hasOneUse()) return {x, 1};
  auto broadcast = merge.getX().getDefiningOp<graph::BroadcastOp>();
  if (!broadcast || !broadcast->hasOneUse()) return {x, 1};
  auto unsqueeze = broadcast.getX().getDefiningOp<graph::ReshapeOp>();
  if (!unsqueeze || !unsqueeze->hasOneUse()) return {x, 1};
  Value x0 = unsqueeze.getX();
  ArrayRef<int64_t> out = cast<RankedTensorType>(x.getType()).getShape(),
                    in = cast<RankedTensorType>(x0.getType()).getShape(),
                    spread = cast<RankedTensorType>(broadcast.getX().getType()).getShape(),
                    copies = cast<RankedTensorType>(broadcast.getType()).getShape();
  const size_t r = in.size();
  if (r < 3 || out.size() != r || spread.size() != r + 1 || copies.size() != r + 1) return {x, 1};
  const size_t h = r - 3;  // the heads' dimension
  const int64_t g = copies[h + 1];
  // [..., Hk, T, D] → [..., Hk, 1, T, D] → [..., Hk, G, T, D] → [..., Hk·G, T, D].
  for (size_t d = 0; d < r; ++d) {
    const size_t o = d <= h ? d : d + 1;  // its place in the 5-D forms
    if (spread[o] != in[d] || copies[o] != in[d]) return {x, 1};
    if (out[d] != (d == h ? in[d] * g : in[d])) return {x, 1};
  }
  if (spread[h + 1] != 1 || g < 2) return {x, 1};
  return {x0, g};
}

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;

  // Attention whose k and v are grouped-query attention's repeats reads them unrepeated, where
  // every device that splits the heads keeps whole groups.
  void ungroup(graph::CausalAttentionOp attention, OpBuilder& b) {
    auto [k0, gk] = beforeRepeat(attention.getK());
    auto [v0, gv] = beforeRepeat(attention.getV());
    if (gk < 2 || gk != gv || k0.getType() != v0.getType()) return;
    const auto shape = cast<RankedTensorType>(k0.getType()).getShape();
    if (shape[shape.size() - 3] % kvHeadsDivisor != 0) return;
    Value k = attention.getK(), v = attention.getV();
    b.setInsertionPoint(attention);
    auto grouped = graph::CausalAttentionOp::create(b, attention.getLoc(), attention.getQ(), k0, v0,
                                                    attention.getScaleAttr());
    attention.replaceAllUsesWith(grouped);
    attention.erase();
    for (Value repeated : {k, v}) {
      auto merge = repeated.getDefiningOp<graph::ReshapeOp>();
      auto broadcast = merge.getX().getDefiningOp<graph::BroadcastOp>();
      auto unsqueeze = broadcast.getX().getDefiningOp<graph::ReshapeOp>();
      merge.erase();
      broadcast.erase();
      unsqueeze.erase();
    }
  }

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
      ungroup(fused, b);
    }
  }
};

}  // namespace
}  // namespace dtc
