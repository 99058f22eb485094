// The GEMM epilogues as patterns of the lowering onto kernels: the bias add, the tanh GELU and
// the GELU gradient join the linear layer's GEMM in one plan.kernel call (see
// lowering/EpilogueFusion.h).
#include "lowering/EpilogueFusion.h"

#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"
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

// reduce_sum(v) over every dimension but the last (a bias gradient) beside the weight gradient
// linear_grad_weight(dy, x) of the same layer, where dy is v, or v's narrowing cast (the 16-bit
// gradient the GEMM reads), or v is dy's widening cast: one linear_grad_weight_bias(dy, x) gives
// both, the bias gradient summed from the dy the GEMM reads, as cuBLASLt's BGRADB epilogue sums
// it (under mixed precision the 16-bit dy, as torch.autocast sums a bf16 bias's gradient).
void fuseBiasGrad(graph::ReduceSumOp sum, OpBuilder& b) {
  Value v = sum.getX();
  auto vType = cast<RankedTensorType>(v.getType());
  const int64_t rank = vType.getRank();
  if (rank < 2 || sum.getKeepdims() || static_cast<int64_t>(sum.getAxes().size()) != rank - 1)
    return;
  for (auto [i, axis] : llvm::enumerate(sum.getAxes()))
    if (axis != static_cast<int64_t>(i)) return;
  // The GEMM's dy: v itself, its narrowing cast, or what v widens.
  SmallVector<Value> candidates{v};
  graph::CastOp widen = v.getDefiningOp<graph::CastOp>();
  if (widen && elementOf(v).isF32() && !elementOf(widen.getX()).isF32())
    candidates.push_back(widen.getX());
  for (Operation* user : v.getUsers())
    if (auto narrow = dyn_cast<graph::CastOp>(user); narrow && !elementOf(narrow.getY()).isF32())
      candidates.push_back(narrow.getY());
  // Where the fused call can go: at the GEMM when nothing reads the bias gradient before it,
  // else at the reduce_sum when the GEMM's operands are ready there (a narrowing cast of v moves
  // up to it; sequence parallelism's backward gathers x late, which rules that out).
  const auto before = [](Value value, Operation* at) {
    Operation* def = value.getDefiningOp();
    return !def || def->getBlock() != at->getBlock() || def->isBeforeInBlock(at);
  };
  for (Value dy : candidates)
    for (Operation* user : dy.getUsers()) {
      auto grad = dyn_cast<graph::LinearGradWeightOp>(user);
      if (!grad || grad.getDy() != dy || grad->getBlock() != sum->getBlock()) continue;
      bool atGemm = true;
      for (Operation* reader : sum.getResult().getUsers())
        if (reader->getBlock() == grad->getBlock() && !grad->isBeforeInBlock(reader))
          atGemm = false;
      auto narrow = dy.getDefiningOp<graph::CastOp>();
      const bool hoistable = narrow && dy != v;
      if (!atGemm && (!before(grad.getX(), sum) || (!hoistable && !before(dy, sum)))) continue;
      if (!atGemm && hoistable && !narrow->isBeforeInBlock(sum)) narrow->moveBefore(sum);
      b.setInsertionPoint(atGemm ? grad.getOperation() : sum.getOperation());
      auto fused = call(b, grad.getLoc(), "linear_grad_weight_bias",
                        {grad.getType(), sum.getType()}, ValueRange{dy, grad.getX()});
      inheritMarks(grad, fused);
      grad.getResult().replaceAllUsesWith(fused->getResult(0));
      sum.getResult().replaceAllUsesWith(fused->getResult(1));
      grad.erase();
      sum.erase();
      if (widen && widen.getY().use_empty()) widen.erase();
      return;
    }
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
  SmallVector<graph::ReduceSumOp> sums;
  function.walk([&](graph::ReduceSumOp op) { sums.push_back(op); });
  for (graph::ReduceSumOp op : sums) fuseBiasGrad(op, b);
  // With its bias gradient summed from the 16-bit dy, a GELU gradient read only by the cast to
  // that type writes it in the type itself.
  // GELU's input is stored in the 16-bit type of the GEMM's operands, as torch.autocast keeps it,
  // where only GELU gradients read it: the forward epilogue writes it beside y and the gradient's
  // reads it (cuBLASLt's aux matrix is D's type, so with y and dx of that type too the epilogues
  // fuse whole), half its bytes. A choice of what is stored, not a fold: it does not wait on
  // absorbCasts.
  SmallVector<plan::KernelOp> forwards;
  function.walk([&](plan::KernelOp op) {
    if (op.getKernel() == "linear_bias_gelu") forwards.push_back(op);
  });
  for (plan::KernelOp op : forwards) {
    Value pre = op->getResult(1);
    const Type low = elementOf(op->getOperand(0));
    if (!graph::is16BitFloat(low) || !elementOf(pre).isF32() || pre.use_empty()) continue;
    bool gradients = true;
    for (Operation* user : pre.getUsers()) {
      auto grad = dyn_cast<plan::KernelOp>(user);
      gradients = gradients && grad && grad.getKernel() == "linear_grad_input_gelu" &&
                  grad->getOperand(2) == pre;
    }
    if (gradients) pre.setType(cast<RankedTensorType>(pre.getType()).clone(low));
  }
  if (!absorbCasts) return;
  SmallVector<plan::KernelOp> inputGrads;
  function.walk([&](plan::KernelOp op) {
    if (op.getKernel() == "linear_grad_input_gelu") inputGrads.push_back(op);
  });
  for (plan::KernelOp op : inputGrads) absorbNarrowing(op, op->getOperand(0));
}

}  // namespace dtc
