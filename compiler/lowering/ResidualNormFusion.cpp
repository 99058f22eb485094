// The residual stream's adds joined to the LayerNorms beside them (see
// lowering/ResidualNormFusion.h).
#include "lowering/ResidualNormFusion.h"

#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"
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

// add(x, r) → layer_norm(sum): at the LayerNorm where nothing reads the sum before it, else at
// the add where the LayerNorm's weight and bias are ready there (ZeRO-3 gathers them late).
void fuseForward(graph::LayerNormOp norm, OpBuilder& b) {
  auto add = norm.getX().getDefiningOp<graph::AddOp>();
  if (!add || !plainSum(add) || add->getBlock() != norm->getBlock()) return;
  Operation* at = norm;
  if (!readAfter(add.getResult(), norm, norm)) {
    if (!definedBefore(norm.getWeight(), add) || !definedBefore(norm.getBias(), add)) return;
    at = add;
  }
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

// add(dres, layer_norm_grad(...)#0): at the gradient where dres is ready there, else at the add
// where nothing reads the weight gradients before it.
void fuseBackward(graph::AddOp add, OpBuilder& b, bool absorbCasts) {
  if (!plainSum(add)) return;
  graph::LayerNormGradOp grad;
  Value dres;
  for (int side = 0; side < 2 && !grad; ++side) {
    auto dx = dyn_cast<OpResult>(add->getOperand(side));
    auto g = dx ? dyn_cast<graph::LayerNormGradOp>(dx.getOwner()) : nullptr;
    if (g && dx.getResultNumber() == 0 && dx.hasOneUse() && g->getBlock() == add->getBlock()) {
      grad = g;
      dres = add->getOperand(1 - side);
    }
  }
  if (!grad) return;
  Operation* at = grad;
  if (!definedBefore(dres, grad)) {
    if (!readAfter(grad.getDweight(), add) || !readAfter(grad.getDbias(), add)) return;
    at = add;
  }
  // The sum's one narrowing cast (the next GEMMs' 16-bit dy), written by the kernel itself.
  graph::CastOp narrow;
  if (absorbCasts)
    for (Operation* reader : add.getResult().getUsers())
      if (auto cast = dyn_cast<graph::CastOp>(reader);
          cast && graph::is16BitFloat(graph::elementOf(cast.getY()))) {
        if (narrow) {
          narrow = nullptr;
          break;
        }
        narrow = cast;
      }
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
}

}  // namespace

void fuseResidualNorms(func::FuncOp function, bool absorbCasts) {
  OpBuilder b(function.getContext());
  SmallVector<graph::LayerNormOp> norms;
  function.walk([&](graph::LayerNormOp op) { norms.push_back(op); });
  for (graph::LayerNormOp norm : norms) fuseForward(norm, b);
  SmallVector<graph::AddOp> adds;
  function.walk([&](graph::AddOp op) { adds.push_back(op); });
  for (graph::AddOp add : adds) fuseBackward(add, b, absorbCasts);
}

}  // namespace dtc
