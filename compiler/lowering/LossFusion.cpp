// The loss and its gradient in one step (see lowering/LossFusion.h).
#include "lowering/LossFusion.h"

#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"
#include "plan/IR/PlanOps.h"

using namespace mlir;

namespace dtc {
namespace {

// The 16-bit value `logits` (f32) widens, or `logits` itself.
Value storedLogits(Value logits) {
  auto widen = logits.getDefiningOp<graph::CastOp>();
  if (widen && graph::is16BitFloat(graph::elementOf(widen.getX()))) return widen.getX();
  return logits;
}

void fuse(graph::SoftmaxCrossEntropyGradOp grad) {
  Value logits = grad.getLogits();
  graph::SoftmaxCrossEntropyOp loss;
  for (Operation* user : logits.getUsers())
    if (auto ce = dyn_cast<graph::SoftmaxCrossEntropyOp>(user);
        ce && ce.getLabels() == grad.getLabels() && ce.getCountAttr() == grad.getCountAttr() &&
        ce.getIgnoreIndexAttr() == grad.getIgnoreIndexAttr() &&
        ce->getBlock() == grad->getBlock() && ce->isBeforeInBlock(grad))
      loss = ce;
  if (!loss) return;
  // The fused step takes the gradient's place: the loss must not be read before it.
  for (Operation* reader : loss.getLoss().getUsers())
    if (reader->getBlock() == grad->getBlock() && !grad->isBeforeInBlock(reader)) return;
  Value stored = storedLogits(logits);
  // Read by the loss, its gradient and (under mixed precision) nothing else: the widened copy goes.
  for (Operation* user : logits.getUsers())
    if (user != loss && user != grad) return;
  // The gradient in the logits' stored type where only a cast to that type reads it.
  Value dlogits = grad.getDlogits();
  graph::CastOp narrow;
  if (stored != logits && dlogits.hasOneUse())
    if (auto cast = dyn_cast<graph::CastOp>(*dlogits.user_begin());
        cast && graph::elementOf(cast.getY()) == graph::elementOf(stored))
      narrow = cast;
  if (stored != logits && !narrow) stored = logits;  // no 16-bit reader: keep the f32 form
  OpBuilder b(grad);
  SmallVector<NamedAttribute> params;
  if (auto count = grad.getCountAttr()) params.push_back(b.getNamedAttr("count", count));
  if (auto ignore = grad.getIgnoreIndexAttr())
    params.push_back(b.getNamedAttr("ignore_index", ignore));
  Type dType = narrow ? narrow.getY().getType() : dlogits.getType();
  auto fused = plan::KernelOp::create(b, grad.getLoc(), TypeRange{loss.getLoss().getType(), dType},
                                      ValueRange{stored, grad.getLabels(), grad.getDloss()},
                                      b.getStringAttr("softmax_cross_entropy_with_grad"),
                                      b.getDictionaryAttr(params));
  inheritMarks(grad, fused);
  loss.getLoss().replaceAllUsesWith(fused->getResult(0));
  (narrow ? narrow.getY() : dlogits).replaceAllUsesWith(fused->getResult(1));
  if (narrow) narrow->erase();
  grad->erase();
  loss->erase();
  if (stored != logits && logits.use_empty()) logits.getDefiningOp()->erase();
}

}  // namespace

void fuseCrossEntropy(func::FuncOp function) {
  SmallVector<graph::SoftmaxCrossEntropyGradOp> grads;
  function.walk([&](graph::SoftmaxCrossEntropyGradOp op) { grads.push_back(op); });
  for (graph::SoftmaxCrossEntropyGradOp grad : grads) fuse(grad);
}

}  // namespace dtc
