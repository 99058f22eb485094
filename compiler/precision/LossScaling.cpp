// dtc-loss-scaling: GradScaler's dynamic loss scale in @train_step (see Passes.td).
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "Passes.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_LOSSSCALING
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct LossScalingPass : impl::LossScalingBase<LossScalingPass> {
  using LossScalingBase::LossScalingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(fn::kTrainStep);
    if (!step) {
      module.emitError("dtc-loss-scaling: the module has no @train_step (run dtc-optimizer first)");
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Block& body = step.getBody().front();
    Location loc = step.getLoc();

    // The scale and the run of good steps: optimizer-like state.
    auto addState = [&](StringRef name, double initial) {
      unsigned index = step.getNumArguments();
      (void)step.insertArgument(
          index, scalar,
          b.getDictionaryAttr({b.getNamedAttr(attr::kState, b.getStringAttr(name)),
                               b.getNamedAttr(attr::kInitial, b.getF32FloatAttr(initial))}),
          loc);
      return step.getArgument(index);
    };
    Value scale = addState("loss_scale", initScale);
    Value good = addState("loss_scale.good_steps", 0.0);

    // Backward starts from the scale.
    SmallVector<Operation*> seeds;
    step.walk([&](graph::FillOp op) {
      if (op->hasAttr(attr::kLossSeed)) seeds.push_back(op);
    });
    // Accumulation's seed is 1/K: each micro-batch starts from that share of the scale. The
    // new seed keeps the mark (and the seed's place in a pipeline): backward starts there.
    for (Operation* seed : seeds) {
      const float share = cast<graph::FillOp>(seed).getValue().convertToFloat();
      b.setInsertionPoint(seed);
      auto scaled = graph::ScaleOp::create(b, seed->getLoc(), scale, b.getF32FloatAttr(share));
      for (NamedAttribute a : seed->getDiscardableAttrs())
        scaled->setAttr(a.getName(), a.getValue());
      seed->getResult(0).replaceAllUsesWith(scaled.getResult());
      seed->erase();
    }

    SmallVector<Operation*> updates;
    step.walk([&](Operation* op) {
      if (graph::isOptimizerUpdate(op)) updates.push_back(op);
    });
    if (updates.empty()) return;
    // Overflow check and unscaling, before the first update.
    b.setInsertionPoint(updates.front());
    Value nonfinite;
    for (Operation* op : updates) {
      Value count = graph::NonfiniteCountOp::create(b, op->getLoc(), scalar, op->getOperand(1));
      nonfinite =
          nonfinite ? graph::AddOp::create(b, op->getLoc(), nonfinite, count).getResult() : count;
    }
    auto decision = graph::LossScaleStepOp::create(
        b, loc, TypeRange{scalar, scalar, scalar, scalar}, scale, good, nonfinite,
        b.getI64IntegerAttr(interval), b.getF32FloatAttr(static_cast<float>(growth)),
        b.getF32FloatAttr(static_cast<float>(backoff)));
    for (Operation* op : updates) {
      b.setInsertionPoint(op);
      op->setOperand(
          1, graph::MulOp::create(b, op->getLoc(), op->getOperand(1), decision.getInvScale()));
    }

    // A skipped step keeps every parameter and optimizer state tensor (AdamW's count too).
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    llvm::StringMap<Value> stateArg;
    for (BlockArgument arg : step.getArguments()) {
      unsigned i = arg.getArgNumber();
      bool trainable = step.getArgAttr(i, attr::kTrainable) != nullptr;
      if (auto name = step.getArgAttrOfType<StringAttr>(i, attr::kParam); name && trainable)
        stateArg[name.getValue()] = arg;
      if (auto name = step.getArgAttrOfType<StringAttr>(i, attr::kState))
        stateArg[name.getValue()] = arg;
    }
    SmallVector<Value> results(ret.getOperands());
    llvm::DenseMap<Operation*, Operation*> lastChoice;
    for (auto [i, v] : llvm::enumerate(results)) {
      auto name = step.getResultAttrOfType<StringAttr>(i, attr::kUpdates);
      if (!name || !stateArg.count(name.getValue()) || v == stateArg.lookup(name.getValue()))
        continue;
      // Each choice right after its update: the update's results are temporaries until the
      // choice, so choosing at the end would hold every parameter's and moment's new value at
      // once (three times the fp32 parameters at the peak, for AdamW).
      Operation* def = v.getDefiningOp();
      if (!def || def->getBlock() != &body || !decision->isBeforeInBlock(def)) def = decision;
      Operation*& last = lastChoice[def];  // an update's choices in the order of its results
      b.setInsertionPointAfter(last ? last : def);
      v = graph::SelectOp::create(b, v.getLoc(), decision.getKeep(), v,
                                  stateArg.lookup(name.getValue()));
      last = v.getDefiningOp();
    }
    ret->setOperands(results);
    b.setInsertionPoint(ret);
    // The scale and the run of good steps, updated.
    for (auto [value, name] : {std::pair{decision.getNewScale(), "loss_scale"},
                               std::pair{decision.getNewGoodSteps(), "loss_scale.good_steps"}}) {
      const unsigned index = step.getNumResults();
      if (failed(step.insertResult(
              index, value.getType(),
              b.getDictionaryAttr(b.getNamedAttr(attr::kUpdates, b.getStringAttr(name))))))
        return signalPassFailure();
      ret.getOperandsMutable().append(value);
    }
  }
};

}  // namespace
}  // namespace dtc
