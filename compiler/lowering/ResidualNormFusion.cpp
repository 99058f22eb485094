// The residual stream's adds joined to the LayerNorms and RMSNorms beside them (see
// lowering/ResidualNormFusion.h).
#include "lowering/ResidualNormFusion.h"

#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"
#include "ops/norm_parts.h"
#include "plan/IR/PlanOps.h"

using namespace mlir;

namespace dtc {
namespace {

// An element-wise f32 sum of two values of its own type (no broadcast).
bool plainSum(graph::AddOp add) {
  return add.getLhs().getType() == add.getType() && add.getRhs().getType() == add.getType() &&
         graph::elementOf(add.getResult()).isF32();
}

bool definedBefore(Value value, Operation* at) {
  Operation* def = value.getDefiningOp();
  return !def || def->getBlock() != at->getBlock() || def->isBeforeInBlock(at);
}

// Whether every reader of `value` in `at`'s block comes after `at`.
bool readAfter(Value value, Operation* at, Operation* besides = nullptr) {
  for (Operation* reader : value.getUsers())
    if (reader != besides && reader->getBlock() == at->getBlock() && !at->isBeforeInBlock(reader))
      return false;
  return true;
}

plan::KernelOp call(OpBuilder& b, Location loc, StringRef kernel, TypeRange results,
                    ValueRange operands, ArrayRef<NamedAttribute> params) {
  return plan::KernelOp::create(b, loc, results, operands, b.getStringAttr(kernel),
                                b.getDictionaryAttr(params));
}

// The sum's one narrowing cast to 16 bits (the next GEMMs' dy), written by the fused kernel.
graph::CastOp soleNarrowing(Value sum) {
  graph::CastOp narrow;
  for (Operation* reader : sum.getUsers())
    if (auto cast = dyn_cast<graph::CastOp>(reader);
        cast && graph::is16BitFloat(graph::elementOf(cast.getY()))) {
      if (narrow) return nullptr;
      narrow = cast;
    }
  return narrow;
}

// The residual add whose sum `norm` normalizes, and where the fused op goes: at the norm where
// nothing reads the sum before it, else at the add where the norm's `params` are ready there
// (ZeRO-3 gathers them late). Null where there is none or neither place serves.
std::pair<graph::AddOp, Operation*> residualAddOf(Operation* norm, ValueRange params) {
  auto add = norm->getOperand(0).getDefiningOp<graph::AddOp>();
  if (!add || !plainSum(add) || add->getBlock() != norm->getBlock()) return {};
  if (readAfter(add.getResult(), norm, norm)) return {add, norm};
  for (Value p : params)
    if (!definedBefore(p, add)) return {};
  return {add, add};
}

// The norm gradient `Grad` whose dx (its first result, read by `add` alone) `add` adds to the
// residual stream's gradient, and that gradient; a null op where `add` is not that.
template <typename Grad>
std::pair<Grad, Value> gradientAddedBy(graph::AddOp add) {
  if (!plainSum(add)) return {};
  for (int side = 0; side < 2; ++side) {
    auto dx = dyn_cast<OpResult>(add->getOperand(side));
    auto g = dx ? dyn_cast<Grad>(dx.getOwner()) : nullptr;
    if (g && dx.getResultNumber() == 0 && dx.hasOneUse() && g->getBlock() == add->getBlock())
      return {g, add->getOperand(1 - side)};
  }
  return {};
}

// Where a fused gradient goes: at the norm's gradient where `dres` is ready there, else at the
// add where nothing reads `weightGrads` before it; null where neither serves.
Operation* gradientPlace(Operation* grad, graph::AddOp add, Value dres, ValueRange weightGrads) {
  if (definedBefore(dres, grad)) return grad;
  for (Value g : weightGrads)
    if (!readAfter(g, add)) return nullptr;
  return add;
}

// add(x, r) → layer_norm(sum): at the LayerNorm where nothing reads the sum before it, else at
// the add where the LayerNorm's weight and bias are ready there (ZeRO-3 gathers them late).
void fuseForward(graph::LayerNormOp norm, OpBuilder& b) {
  auto [add, at] = residualAddOf(norm, {norm.getWeight(), norm.getBias()});
  if (!add) return;
  b.setInsertionPoint(at);
  SmallVector<Type> types{add.getType()};
  for (Type t : norm->getResultTypes()) types.push_back(t);
  auto fused = call(b, norm.getLoc(), "add_layer_norm", types,
                    {add.getLhs(), add.getRhs(), norm.getWeight(), norm.getBias()},
                    {b.getNamedAttr("eps", norm.getEpsAttr())});
  inheritMarks(norm, fused);
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  for (auto [k, r] : llvm::enumerate(norm->getResults()))
    r.replaceAllUsesWith(fused->getResult(k + 1));
  norm->erase();
  add->erase();
}

// add(dres, layer_norm_grad(...)#0), placed by gradientPlace; whether it fused.
bool fuseBackward(graph::AddOp add, OpBuilder& b, bool absorbCasts) {
  auto [grad, dres] = gradientAddedBy<graph::LayerNormGradOp>(add);
  if (!grad) return false;
  Operation* at = gradientPlace(grad, add, dres, {grad.getDweight(), grad.getDbias()});
  if (!at) return false;
  graph::CastOp narrow = absorbCasts ? soleNarrowing(add.getResult()) : nullptr;
  b.setInsertionPoint(at);
  SmallVector<Type> types{add.getType(), grad.getDweight().getType(), grad.getDbias().getType()};
  if (narrow) types.push_back(narrow.getType());
  auto fused =
      call(b, grad.getLoc(), "layer_norm_grad_add", types,
           {grad.getDy(), grad.getX(), grad.getWeight(), grad.getMean(), grad.getRstd(), dres}, {});
  inheritMarks(grad, fused);
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  grad.getDweight().replaceAllUsesWith(fused->getResult(1));
  grad.getDbias().replaceAllUsesWith(fused->getResult(2));
  if (narrow) {
    narrow.getResult().replaceAllUsesWith(fused->getResult(3));
    narrow->erase();
  }
  add->erase();
  grad->erase();
  return true;
}

// A widening cast from 16 bits that only `reader` reads: the fused kernel reads its operand as
// stored, widening it exactly as the cast did.
graph::CastOp widenedForOnly(Value value, Operation* reader) {
  auto cast = value.getDefiningOp<graph::CastOp>();
  if (!cast || !cast->hasOneUse() || *cast->getUsers().begin() != reader ||
      !graph::is16BitFloat(graph::elementOf(cast.getX())) || !graph::elementOf(value).isF32())
    return nullptr;
  return cast;
}

// The operand a fused kernel reads for `value`, an input of `reader`: the cast's 16-bit input
// where only `reader` reads the widening (noted in `absorbed` to erase once replaced).
Value storedOperand(Value value, Operation* reader, bool absorbCasts,
                    SmallVectorImpl<Operation*>& absorbed) {
  if (absorbCasts)
    if (graph::CastOp cast = widenedForOnly(value, reader)) {
      absorbed.push_back(cast);
      return cast.getX();
    }
  return value;
}

// add(x, r) → rms_norm(sum), placed as fuseForward places add_layer_norm; r (or x) may be the
// 16-bit sublayer output a widening cast fed the add.
void fuseForwardRms(graph::RmsNormOp norm, OpBuilder& b, bool absorbCasts) {
  auto [add, at] = residualAddOf(norm, {norm.getWeight()});
  if (!add) return;
  SmallVector<Operation*> absorbed;
  Value x = storedOperand(add.getLhs(), add, absorbCasts, absorbed);
  Value r = storedOperand(add.getRhs(), add, absorbCasts, absorbed);
  // Both operands 16-bit would be a sum no cast rounds; keep one widening then.
  if (absorbed.size() == 2) {
    x = add.getLhs();
    absorbed.erase(absorbed.begin());
  }
  b.setInsertionPoint(at);
  SmallVector<Type> types{add.getType()};
  for (Type t : norm->getResultTypes()) types.push_back(t);
  auto fused = call(b, norm.getLoc(), "add_rms_norm", types, {x, r, norm.getWeight()},
                    {b.getNamedAttr("eps", norm.getEpsAttr())});
  inheritMarks(norm, fused);
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  for (auto [k, result] : llvm::enumerate(norm->getResults()))
    result.replaceAllUsesWith(fused->getResult(k + 1));
  norm->erase();
  add->erase();
  for (Operation* cast : absorbed) cast->erase();
}

// dy's parts where dy is a chain of adds only the gradient reads, ((p₁ + p₂) + …) + pₙ: the leaves
// in the order the chain sums them, at most kRmsNormGradParts, with the adds to erase.
SmallVector<Value> dyParts(Value dy, Block* block, SmallVectorImpl<Operation*>& chain) {
  auto link = [&](Value v) {
    auto a = v.getDefiningOp<graph::AddOp>();
    return a && plainSum(a) && a->hasOneUse() && a->getBlock() == block ? a : nullptr;
  };
  SmallVector<Value> reversed;  // pₙ first
  Value rest = dy;
  while (reversed.size() + 2 <= kRmsNormGradParts) {
    graph::AddOp add = link(rest);
    if (!add) break;
    // The side that is itself such an add continues the chain; the other is this add's part.
    const bool left = link(add.getLhs()) || !link(add.getRhs());
    reversed.push_back(left ? add.getRhs() : add.getLhs());
    rest = left ? add.getLhs() : add.getRhs();
    chain.push_back(add);
  }
  reversed.push_back(rest);
  return SmallVector<Value>(llvm::reverse(reversed));
}

// add(dres, rms_norm_grad(dy, ...)#0) → rms_norm_grad_add(dy's parts..., x, w, rstd, dres),
// placed by gradientPlace; each part a 16-bit GEMM gradient where only a widening cast fed it to
// the chain.
void fuseBackwardRms(graph::AddOp add, OpBuilder& b, bool absorbCasts) {
  auto [grad, dres] = gradientAddedBy<graph::RmsNormGradOp>(add);
  if (!grad || !graph::elementOf(grad.getDx()).isF32()) return;
  Operation* at = gradientPlace(grad, add, dres, {grad.getDweight()});
  if (!at) return;
  SmallVector<Operation*> chain, absorbed;
  SmallVector<Value> parts;
  if (graph::elementOf(grad.getDy()).isF32())
    parts = dyParts(grad.getDy(), grad->getBlock(), chain);
  else
    parts.push_back(grad.getDy());
  // Each part as the op that sums it reads it (chain[0] is the last add; the first reads two).
  for (size_t k = 0; k < parts.size(); ++k) {
    Operation* reader =
        chain.empty() ? grad.getOperation() : chain[chain.size() - std::max<size_t>(k, 1)];
    parts[k] = storedOperand(parts[k], reader, absorbCasts, absorbed);
  }
  graph::CastOp narrow = absorbCasts ? soleNarrowing(add.getResult()) : nullptr;
  b.setInsertionPoint(at);
  SmallVector<Type> types{add.getType(), grad.getDweight().getType()};
  if (narrow) types.push_back(narrow.getType());
  SmallVector<Value> operands(parts);
  operands.append({grad.getX(), grad.getWeight(), grad.getRstd(), dres});
  auto fused = call(b, grad.getLoc(), "rms_norm_grad_add", types, operands, {});
  inheritMarks(grad, fused);
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  grad.getDweight().replaceAllUsesWith(fused->getResult(1));
  if (narrow) {
    narrow.getResult().replaceAllUsesWith(fused->getResult(2));
    narrow->erase();
  }
  add->erase();
  grad->erase();
  for (Operation* op : chain) op->erase();
  for (Operation* cast : absorbed) cast->erase();
}

}  // namespace

void fuseResidualNorms(func::FuncOp function, bool absorbCasts) {
  OpBuilder b(function.getContext());
  SmallVector<graph::LayerNormOp> norms;
  function.walk([&](graph::LayerNormOp op) { norms.push_back(op); });
  for (graph::LayerNormOp norm : norms) fuseForward(norm, b);
  SmallVector<graph::RmsNormOp> rmsNorms;
  function.walk([&](graph::RmsNormOp op) { rmsNorms.push_back(op); });
  for (graph::RmsNormOp norm : rmsNorms) fuseForwardRms(norm, b, absorbCasts);
  SmallVector<graph::AddOp> adds;
  function.walk([&](graph::AddOp op) { adds.push_back(op); });
  // A fusion erases its own add and, for RMSNorm, the adds of the dy chain the gradient reads:
  // those come before it in the block, so they have been visited already.
  for (graph::AddOp add : adds)
    if (!fuseBackward(add, b, absorbCasts)) fuseBackwardRms(add, b, absorbCasts);
}

}  // namespace dtc
