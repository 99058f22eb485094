// Reverse-mode autodiff over the graph dialect: @forward -> @grad.
#include "Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_AUTODIFF
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// Values whose gradient is needed: those that depend on a trainable parameter.
llvm::DenseSet<Value> valuesNeedingGradients(func::FuncOp func) {
  llvm::DenseSet<Value> needed;
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), attr::kTrainable)) needed.insert(arg);
  for (Operation& op : func.getBody().front())
    if (llvm::any_of(op.getOperands(), [&](Value v) { return needed.contains(v); }))
      for (Value r : op.getResults()) needed.insert(r);
  return needed;
}

// Removes ops whose results are unused: gradient rules may build values (e.g. the gradient of
// a data input) that nothing consumes.
void eraseDeadOps(func::FuncOp func) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation& op : llvm::make_early_inc_range(llvm::reverse(func.getBody().front())))
      if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() && isPure(&op)) {
        op.erase();
        changed = true;
      }
  }
}

// Marks every op a gradient rule builds as backward, on the pipeline stage of the forward op it
// differentiates (when stages were assigned), so the pipeline schedule can place it.
struct BackwardTagger : OpBuilder::Listener {
  Attribute stage;
  void notifyOperationInserted(Operation* op, OpBuilder::InsertPoint) override {
    op->setAttr(dist::kBackwardAttr, UnitAttr::get(op->getContext()));
    if (stage) op->setAttr(dist::kStageAttr, stage);
  }
};

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(fn::kForward);
    if (!forward) {
      module.emitError("dtc-autodiff: the module has no @forward function");
      return signalPassFailure();
    }
    if (module.lookupSymbol(fn::kGrad)) {
      module.emitError("dtc-autodiff: the module already has a @grad function");
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto grad = cast<func::FuncOp>(b.clone(*forward));
    grad.setSymName("grad");
    if (failed(differentiate(grad))) return signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp func) {
    Block& body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);
    llvm::DenseSet<Value> needed = valuesNeedingGradients(func);

    OpBuilder b(ret);
    BackwardTagger tagger;
    // Only pipelines schedule by it; other plans' IR stays free of it.
    if (func->getParentOfType<ModuleOp>()->hasAttr(dist::kPipelineAttr)) b.setListener(&tagger);
    if (Operation* def = loss.getDefiningOp()) tagger.stage = def->getAttr(dist::kStageAttr);
    llvm::DenseMap<Value, Value> grads;
    auto accumulate = [&](Value target, Value contribution, Location loc) {
      auto [it, inserted] = grads.try_emplace(target, contribution);
      if (!inserted) it->second = graph::AddOp::create(b, loc, it->second, contribution);
    };
    auto seed = graph::FillOp::create(b, ret.getLoc(), loss.getType(), b.getF32FloatAttr(1.0f));
    seed->setAttr(attr::kLossSeed, b.getUnitAttr());  // dtc-loss-scaling scales it
    grads[loss] = seed;

    SmallVector<Operation*> forwardOps;
    for (Operation& op : body.without_terminator()) forwardOps.push_back(&op);
    for (Operation* op : llvm::reverse(forwardOps)) {
      if (llvm::none_of(op->getResults(), [&](Value r) { return grads.count(r); })) continue;
      if (llvm::none_of(op->getOperands(), [&](Value v) { return needed.contains(v); })) continue;
      auto rule = dyn_cast<graph::GradientOpInterface>(op);
      if (!rule)
        return op->emitError("cannot differentiate '")
               << op->getName() << "': it has no gradient rule";
      SmallVector<Value> resultGrads;
      for (Value r : op->getResults()) resultGrads.push_back(grads.lookup(r));
      tagger.stage = op->getAttr(dist::kStageAttr);
      FailureOr<SmallVector<Value>> operandGrads = rule.buildGradients(b, resultGrads);
      if (failed(operandGrads)) return failure();
      for (auto [operand, g] : llvm::zip(op->getOperands(), *operandGrads))
        if (g && needed.contains(operand)) accumulate(operand, g, op->getLoc());
    }

    SmallVector<Value> results{loss};
    SmallVector<Attribute> names;
    for (BlockArgument arg : func.getArguments()) {
      if (!func.getArgAttr(arg.getArgNumber(), attr::kTrainable)) continue;
      Value g = grads.lookup(arg);
      tagger.stage = func.getArgAttr(arg.getArgNumber(), dist::kStageAttr);
      // A parameter the loss does not depend on has a zero gradient, as in PyTorch after
      // zero_grad (where .grad would be None and the optimizer skips it; SGD/AdamW then only
      // apply weight decay here, a documented difference).
      if (!g) g = graph::FillOp::create(b, ret.getLoc(), arg.getType(), b.getF32FloatAttr(0.0f));
      results.push_back(g);
      names.push_back(func.getArgAttr(arg.getArgNumber(), attr::kParam));
    }
    SmallVector<DictionaryAttr> resultAttrs{func.getResultAttrDict(0)};
    for (Attribute name : names)
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(attr::kGradOf, name)));
    // Buffers the forward pass updates (BatchNorm's running statistics) stay results.
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (func.getResultAttr(i, attr::kUpdates)) {
        results.push_back(v);
        resultAttrs.push_back(func.getResultAttrDict(i));
      }
    b.setListener(nullptr);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();

    SmallVector<Type> types;
    for (Value v : results) types.push_back(v.getType());
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(), types));
    func.setAllResultAttrs(resultAttrs);
    eraseDeadOps(func);
    return success();
  }
};

}  // namespace
}  // namespace dtc
