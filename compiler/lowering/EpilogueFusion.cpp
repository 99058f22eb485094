// The GEMM epilogues as patterns of the lowering onto kernels: the bias add, the tanh GELU and
// the GELU gradient join the linear layer's GEMM in one plan.kernel call (see
// lowering/EpilogueFusion.h).
#include "lowering/EpilogueFusion.h"

#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "graph/IR/GraphOps.h"
#include "plan/IR/PlanOps.h"

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

Type elementOf(Value value) { return cast<RankedTensorType>(value.getType()).getElementType(); }

plan::KernelOp call(OpBuilder& b, Location loc, StringRef kernel, TypeRange results,
                    ValueRange operands) {
  return plan::KernelOp::create(b, loc, results, operands, b.getStringAttr(kernel),
                                b.getDictionaryAttr({}));
}

// When the fused call's y (f32) feeds only a cast to x's 16-bit type, the call writes y in that
// type: the epilogue rounds once, as the cast did.
void absorbNarrowing(plan::KernelOp fused, Value x) {
  Value y = fused->getResult(0);
  if (!y.hasOneUse()) return;
  auto narrow = dyn_cast<graph::CastOp>(*y.getUsers().begin());
  if (!narrow || !elementOf(y).isF32() || elementOf(narrow.getY()) != elementOf(x) ||
      elementOf(x).isF32())
    return;
  y.setType(narrow.getY().getType());
  narrow.getY().replaceAllUsesWith(y);
  narrow.erase();
}

// y = linear(x, w) [→ cast] → add(·, b [N]) [→ gelu(tanh)] becomes linear_bias(_gelu).
void fuseBias(graph::AddOp add, OpBuilder& b, bool absorbCasts) {
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
    // At the add: whatever reads the add's result (the GELU, and under sequence parallelism a
    // collective placed before the GELU) comes after it.
    b.setInsertionPoint(add);
    Value operands[] = {linear.getX(), linear.getWeight(), bias};
    plan::KernelOp fused;
    if (gelu) {
      fused = call(b, linear.getLoc(), "linear_bias_gelu", {productType, productType}, operands);
      inheritMarks(add, fused);
      gelu.getY().replaceAllUsesWith(fused->getResult(0));
      add.getResult().replaceAllUsesWith(fused->getResult(1));
      gelu.erase();
    } else {
      fused = call(b, linear.getLoc(), "linear_bias", {productType}, operands);
      inheritMarks(add, fused);
      add.getResult().replaceAllUsesWith(fused->getResult(0));
    }
    add.erase();
    for (Operation* op : chain) op->erase();
    if (absorbCasts) absorbNarrowing(fused, operands[0]);
    return;
  }
}

// gelu_grad(linear_grad_input(dy, w) [→ cast], pre) becomes linear_grad_input_gelu.
void fuseGeluGrad(graph::GeluGradOp geluGrad, OpBuilder& b) {
  if (!geluGrad.getApproximateTanh() || !elementOf(geluGrad.getAt()).isF32()) return;
  SmallVector<Operation*> chain;
  auto grad = contractionBehind<graph::LinearGradInputOp>(geluGrad.getDy(), chain);
  if (!grad) return;
  b.setInsertionPoint(geluGrad);
  auto fused = call(b, grad.getLoc(), "linear_grad_input_gelu", {geluGrad.getDx().getType()},
                    ValueRange{grad.getDy(), grad.getWeight(), geluGrad.getAt()});
  inheritMarks(geluGrad, fused);
  geluGrad.getDx().replaceAllUsesWith(fused->getResult(0));
  geluGrad.erase();
  for (Operation* op : chain) op->erase();
}

}  // namespace

void fuseEpilogues(func::FuncOp function, bool absorbCasts) {
  OpBuilder b(function.getContext());
  SmallVector<graph::AddOp> adds;
  function.walk([&](graph::AddOp op) { adds.push_back(op); });
  for (graph::AddOp add : adds) fuseBias(add, b, absorbCasts);
  SmallVector<graph::GeluGradOp> geluGrads;
  function.walk([&](graph::GeluGradOp op) { geluGrads.push_back(op); });
  for (graph::GeluGradOp op : geluGrads) fuseGeluGrad(op, b);
}

}  // namespace dtc
