// dtc-fuse-epilogues: the bias add, the tanh GELU and the GELU gradient join the linear layer's
// GEMM (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "Passes.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// The contraction behind `value`: `value` is its result, or (mixed precision) the widening cast
// of its 16-bit result; every value in between is used only on the way to `value`'s one user.
template <typename ContractionOp>
ContractionOp contractionBehind(Value value, SmallVectorImpl<Operation*>& chain) {
  if (!value.hasOneUse()) return nullptr;
  if (auto cast = value.getDefiningOp<graph::CastOp>()) {
    auto contraction = cast.getX().getDefiningOp<ContractionOp>();
    if (!contraction || !cast.getX().hasOneUse()) return nullptr;
    chain.append({cast, contraction});
    return contraction;
  }
  auto contraction = value.getDefiningOp<ContractionOp>();
  if (contraction) chain.push_back(contraction);
  return contraction;
}

bool isF32(Value value) { return cast<RankedTensorType>(value.getType()).getElementType().isF32(); }

// y = linear(x, w) [→ cast] → add(·, b [N]) [→ gelu(tanh)] becomes linear_bias(_gelu).
void fuseBias(graph::AddOp add, OpBuilder& b) {
  for (int side = 0; side < 2; ++side) {
    Value product = add->getOperand(side), bias = add->getOperand(1 - side);
    auto biasType = cast<RankedTensorType>(bias.getType());
    auto productType = cast<RankedTensorType>(product.getType());
    if (biasType.getRank() != 1 || productType.getRank() < 2 ||
        biasType.getDimSize(0) != productType.getShape().back() || add.getType() != productType)
      continue;
    SmallVector<Operation*> chain;
    auto linear = contractionBehind<graph::LinearOp>(product, chain);
    if (!linear) continue;
    graph::GeluOp gelu;
    for (Operation* user : add->getUsers())
      if (auto g = dyn_cast<graph::GeluOp>(user); g && g.getApproximateTanh()) gelu = g;
    b.setInsertionPoint(gelu ? gelu.getOperation() : add.getOperation());
    if (gelu) {
      auto fused = graph::LinearBiasGeluOp::create(b, linear.getLoc(), linear.getX(),
                                                   linear.getWeight(), bias);
      inheritMarks(add, fused);
      gelu.getY().replaceAllUsesWith(fused.getY());
      add.getResult().replaceAllUsesWith(fused.getPre());
      gelu.erase();
    } else {
      auto fused =
          graph::LinearBiasOp::create(b, linear.getLoc(), linear.getX(), linear.getWeight(), bias);
      inheritMarks(add, fused);
      add.getResult().replaceAllUsesWith(fused.getY());
    }
    add.erase();
    for (Operation* op : chain) op->erase();
    return;
  }
}

// gelu_grad(linear_grad_input(dy, w) [→ cast], pre) becomes linear_grad_input_gelu.
void fuseGeluGrad(graph::GeluGradOp geluGrad, OpBuilder& b) {
  if (!geluGrad.getApproximateTanh() || !isF32(geluGrad.getAt())) return;
  SmallVector<Operation*> chain;
  auto grad = contractionBehind<graph::LinearGradInputOp>(geluGrad.getDy(), chain);
  if (!grad) return;
  b.setInsertionPoint(geluGrad);
  auto fused = graph::LinearGradInputGeluOp::create(b, grad.getLoc(), grad.getDy(),
                                                    grad.getWeight(), geluGrad.getAt());
  inheritMarks(geluGrad, fused);
  geluGrad.getDx().replaceAllUsesWith(fused.getDx());
  geluGrad.erase();
  for (Operation* op : chain) op->erase();
}

struct FuseEpiloguesPass : impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      SmallVector<graph::AddOp> adds;
      function.walk([&](graph::AddOp op) { adds.push_back(op); });
      for (graph::AddOp add : adds) fuseBias(add, b);
      SmallVector<graph::GeluGradOp> geluGrads;
      function.walk([&](graph::GeluGradOp op) { geluGrads.push_back(op); });
      for (graph::GeluGradOp op : geluGrads) fuseGeluGrad(op, b);
    }
  }
};

}  // namespace
}  // namespace dtc
