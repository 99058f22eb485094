// dtc-sync-batch-norm: BatchNorm cut at its per-channel sums (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "Passes.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_SYNCBATCHNORM
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// Values per channel: N·H·W of the (global) input.
int64_t perChannelCount(Value x) {
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  return shape[0] * shape[2] * shape[3];
}

struct SyncBatchNormPass : public impl::SyncBatchNormBase<SyncBatchNormPass> {
  void runOnOperation() override {
    SmallVector<Operation*> ops;
    getOperation().walk([&](Operation* op) {
      if (isa<graph::BatchNormTrainOp, graph::BatchNormTrainGradOp>(op)) ops.push_back(op);
    });
    for (Operation* op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto bn = dyn_cast<graph::BatchNormTrainOp>(op)) {
        IntegerAttr count = b.getI64IntegerAttr(perChannelCount(bn.getX()));
        Value sum = graph::BatchNormSumOp::create(b, loc, bn.getX());
        Value squares = graph::BatchNormCenteredSquaresOp::create(b, loc, bn.getX(), sum, count);
        auto normalize = graph::BatchNormNormalizeOp::create(
            b, loc, bn.getX(), sum, squares, bn.getWeight(), bn.getBias(), bn.getRunningMean(),
            bn.getRunningVar(), count, bn.getEpsAttr(), bn.getMomentumAttr());
        bn->replaceAllUsesWith(normalize->getResults());
      } else {
        auto grad = cast<graph::BatchNormTrainGradOp>(op);
        IntegerAttr count = b.getI64IntegerAttr(perChannelCount(grad.getX()));
        auto sums = graph::BatchNormGradSumsOp::create(b, loc, grad.getDy(), grad.getX(),
                                                       grad.getMean(), grad.getRstd());
        Value dx = graph::BatchNormGradInputOp::create(
            b, loc, grad.getDy(), grad.getX(), grad.getWeight(), grad.getMean(), grad.getRstd(),
            sums.getDbias(), sums.getDweight(), count);
        grad.getDx().replaceAllUsesWith(dx);
        grad.getDweight().replaceAllUsesWith(sums.getDweight());
        grad.getDbias().replaceAllUsesWith(sums.getDbias());
      }
      op->erase();
    }
  }
};

}  // namespace
}  // namespace dtc
