// Appends the optimizer update to @grad, giving @train_step.
#include "Passes.h"

#include <cstdio>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "flatbuffers/ModelImporter.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_OPTIMIZER
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// The name of the AdamW step counter in the state region (one per model, as torch.optim keeps
// one per parameter but they are always equal).
constexpr const char kStepName[] = "optimizer.step";

struct OptimizerPass : impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  LogicalResult checkOptions(ModuleOp module) {
    auto bad = [&](const Twine& message) { return module.emitError(message); };
    if (optimizer != "sgd" && optimizer != "adamw")
      return bad("unknown optimizer '" + optimizer + "' (expected sgd or adamw)");
    if (!(lr > 0)) return bad("learning rate must be positive, got " + std::to_string(lr));
    if (momentum < 0) return bad("momentum must be >= 0");
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
      return bad("AdamW betas must be in [0, 1)");
    if (eps < 0) return bad("eps must be >= 0");
    return success();
  }

  std::string summary(double wd) const {
    char buf[256];
    if (optimizer == "sgd")
      std::snprintf(buf, sizeof buf, "sgd lr=%g momentum=%g weight_decay=%g", (double)lr,
                    (double)momentum, wd);
    else
      std::snprintf(buf, sizeof buf, "adamw lr=%g betas=(%g,%g) eps=%g weight_decay=%g",
                    (double)lr, (double)beta1, (double)beta2, (double)eps, wd);
    return buf;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grad = module.lookupSymbol<func::FuncOp>("grad");
    if (!grad) {
      module.emitError("dtc-optimizer: the module has no @grad function (run dtc-autodiff first)");
      return signalPassFailure();
    }
    if (failed(checkOptions(module))) return signalPassFailure();
    double wd = weightDecay >= 0 ? double(weightDecay) : (optimizer == "adamw" ? 0.01 : 0.0);
    bool adamw = optimizer == "adamw";
    bool hasBuffer = !adamw && momentum != 0;

    OpBuilder b(module.getContext());
    Location loc = grad.getLoc();
    auto scalar = RankedTensorType::get({}, b.getF32Type());

    // Signature: parameters (all, trainable or not), optimizer state, then data.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    SmallVector<unsigned> paramArgs, dataArgs;
    for (BlockArgument arg : grad.getArguments())
      (grad.getArgAttr(arg.getArgNumber(), attr::kData) ? dataArgs : paramArgs)
          .push_back(arg.getArgNumber());
    for (unsigned i : paramArgs) {
      argTypes.push_back(grad.getArgument(i).getType());
      argAttrs.push_back(grad.getArgAttrDict(i));
    }
    struct Slot {
      unsigned param;       // index into grad's arguments
      std::string name;     // "<param>.<slot>"
      unsigned newArg = 0;  // index into train_step's arguments
    };
    SmallVector<Slot> slots;
    SmallVector<StringRef> slotNames;
    if (adamw) slotNames = {"exp_avg", "exp_avg_sq"};
    else if (hasBuffer) slotNames = {"momentum_buffer"};
    for (unsigned i : paramArgs) {
      if (!grad.getArgAttr(i, attr::kTrainable)) continue;
      auto paramName = cast<StringAttr>(grad.getArgAttr(i, attr::kParam)).getValue();
      for (StringRef slot : slotNames) {
        slots.push_back({i, (paramName + "." + slot).str(), (unsigned)argTypes.size()});
        argTypes.push_back(grad.getArgument(i).getType());
        argAttrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr(attr::kState, b.getStringAttr(slots.back().name))));
      }
    }
    std::optional<unsigned> stepArg;
    if (adamw) {
      stepArg = argTypes.size();
      argTypes.push_back(scalar);
      argAttrs.push_back(
          b.getDictionaryAttr(b.getNamedAttr(attr::kState, b.getStringAttr(kStepName))));
    }
    for (unsigned i : dataArgs) {
      argTypes.push_back(grad.getArgument(i).getType());
      argAttrs.push_back(grad.getArgAttrDict(i));
    }

    b.setInsertionPointAfter(grad);
    auto step = func::FuncOp::create(b, loc, "train_step", b.getFunctionType(argTypes, {}));
    Block* body = step.addEntryBlock();
    step.setAllArgAttrs(argAttrs);
    IRMapping mapping;
    for (auto [k, i] : llvm::enumerate(paramArgs))
      mapping.map(grad.getArgument(i), body->getArgument(k));
    for (auto [k, i] : llvm::enumerate(dataArgs))
      mapping.map(grad.getArgument(i), body->getArgument(argTypes.size() - dataArgs.size() + k));
    b.setInsertionPointToEnd(body);
    for (Operation& op : grad.getBody().front().without_terminator()) b.clone(op, mapping);

    // Gradients by parameter name; buffer updates (BatchNorm statistics) pass through.
    auto gradReturn = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    llvm::DenseMap<Attribute, Value> gradByName;
    SmallVector<std::pair<Value, DictionaryAttr>> bufferUpdates;
    for (auto [r, v] : llvm::enumerate(gradReturn.getOperands())) {
      if (Attribute name = grad.getResultAttr(r, attr::kGradOf)) gradByName[name] = mapping.lookup(v);
      if (grad.getResultAttr(r, attr::kUpdates))
        bufferUpdates.push_back({mapping.lookup(v), grad.getResultAttrDict(r)});
    }
    llvm::DenseMap<unsigned, Value> gradOf;
    for (unsigned i : paramArgs)
      if (grad.getArgAttr(i, attr::kTrainable))
        gradOf[i] = gradByName.lookup(grad.getArgAttr(i, attr::kParam));

    SmallVector<Value> results{mapping.lookup(gradReturn.getOperand(0))};
    SmallVector<DictionaryAttr> resultAttrs{grad.getResultAttrDict(0)};
    auto updates = [&](Value v, Attribute name) {
      results.push_back(v);
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(attr::kUpdates, name)));
    };
    Value t;
    if (adamw) {
      Value one = graph::FillOp::create(b, loc, scalar, b.getF32FloatAttr(1.0f));
      t = graph::AddOp::create(b, loc, body->getArgument(*stepArg), one);
    }
    SmallVector<std::pair<Value, Attribute>> stateUpdates;
    auto f32 = [&](double v) { return b.getF32FloatAttr(static_cast<float>(v)); };
    unsigned slotIndex = 0;
    for (auto [k, i] : llvm::enumerate(paramArgs)) {
      if (!grad.getArgAttr(i, attr::kTrainable)) continue;
      Value param = body->getArgument(k);
      Attribute paramName = grad.getArgAttr(i, attr::kParam);
      Location ploc = NameLoc::get(cast<StringAttr>(paramName), loc);
      if (adamw) {
        Slot& m = slots[slotIndex++];
        Slot& v = slots[slotIndex++];
        auto op = graph::AdamwUpdateOp::create(
            b, ploc, param, gradOf[i], body->getArgument(m.newArg), body->getArgument(v.newArg),
            t, f32(lr), f32(beta1), f32(beta2), f32(eps), f32(wd));
        updates(op.getNewParam(), paramName);
        stateUpdates.push_back({op.getNewExpAvg(), b.getStringAttr(m.name)});
        stateUpdates.push_back({op.getNewExpAvgSq(), b.getStringAttr(v.name)});
      } else {
        Value buf;
        if (hasBuffer) buf = body->getArgument(slots[slotIndex].newArg);
        else buf = graph::FillOp::create(b, ploc, param.getType(), b.getF32FloatAttr(0.0f));
        auto op = graph::SgdUpdateOp::create(b, ploc, param, gradOf[i], buf, f32(lr),
                                             f32(momentum), f32(wd));
        updates(op.getNewParam(), paramName);
        if (hasBuffer)
          stateUpdates.push_back(
              {op.getNewBuf(), b.getStringAttr(slots[slotIndex++].name)});
      }
    }
    for (auto& [value, name] : stateUpdates) updates(value, name);
    if (adamw) updates(t, b.getStringAttr(kStepName));
    for (auto& [value, attrs] : bufferUpdates) {
      results.push_back(value);
      resultAttrs.push_back(attrs);
    }

    func::ReturnOp::create(b, loc, results);
    SmallVector<Type> resultTypes;
    for (Value v : results) resultTypes.push_back(v.getType());
    step.setType(b.getFunctionType(argTypes, resultTypes));
    step.setAllResultAttrs(resultAttrs);
    module->setAttr(attr::kOptimizer, b.getStringAttr(summary(wd)));
  }
};

}  // namespace
}  // namespace dtc
