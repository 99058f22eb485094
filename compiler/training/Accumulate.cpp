// dtc-accumulate: K micro-batches per step (see Passes.td).
#include "llvm/ADT/StringMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include <functional>
#include <map>

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "pipeline_parallel/Pipeline.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_ACCUMULATE
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// Each micro-batch's loss counts 1/K of the step's, whatever computes it (dtc's fused losses or
// a mean an import spelled out): autodiff's seed, d(loss)/d(loss), becomes 1/K, and the step's
// loss is the micro-batches' sum scaled by 1/K. A mean over each micro-batch's rows then equals
// the mean over the K-times-larger batch, as PyTorch's `(loss / K).backward()` recipe.
void scaleSeed(Operation* op, int64_t k) {
  if (auto fill = dyn_cast<graph::FillOp>(op); fill && op->hasAttr(attr::kLossSeed))
    fill.setValueAttr(
        Builder(op->getContext())
            .getF32FloatAttr(fill.getValue().convertToFloat() / static_cast<float>(k)));
}

int64_t stageOf(Value v) { return pipeline::stageOf(v.getDefiningOp()); }

// The terms of autodiff's fan-out sums in `v` that come from different pipeline stages,
// grouped by stage (in stage order; terms of one stage summed as autodiff summed them).
// The sums taken apart are erased once nothing uses them.
std::map<int64_t, Value> contributionsByStage(Value v) {
  std::map<int64_t, Value> byStage;
  SmallVector<Operation*> split;
  std::function<void(Value)> visit = [&](Value x) {
    auto add = x.getDefiningOp<graph::AddOp>();
    if (add && add->hasAttr(dist::kBackwardAttr) &&
        stageOf(add.getLhs()) != stageOf(add.getRhs())) {
      split.push_back(add);
      visit(add.getLhs());
      visit(add.getRhs());
      return;
    }
    Value& slot = byStage[stageOf(x)];
    OpBuilder b = OpBuilder::atBlockEnd(x.getParentBlock());
    slot = slot ? graph::AddOp::create(b, x.getLoc(), slot, x).getResult() : x;
  };
  visit(v);
  for (Operation* add : split)
    if (add->use_empty()) add->erase();
  return byStage;
}

// A copy of what `v` is computed from the arguments (labels, reshaped), at `b`'s point.
Value cloneFromArguments(OpBuilder& b, Value v, IRMapping& map,
                         llvm::function_ref<void(Operation*)> place) {
  if (isa<BlockArgument>(v) || map.contains(v)) return map.lookupOrDefault(v);
  Operation* def = v.getDefiningOp();
  for (Value operand : def->getOperands())
    map.map(operand, cloneFromArguments(b, operand, map, place));
  Operation* copy = b.clone(*def, map);
  place(copy);
  return copy->getResult(cast<OpResult>(v).getResultNumber());
}

// A label fraction (a loss's divisor of kept rows) counts the whole step's labels: each
// micro-batch's copy becomes the mean of all of theirs, computed from the labels before the first
// micro-batch (on its pipeline stage, in micro-batch 0's forward unit).
void averageLabelFractions(func::FuncOp func, int64_t k) {
  // The K copies of one fraction: one location, one ignored label.
  std::map<std::pair<const void*, const void*>, SmallVector<graph::LabelFractionOp>> copies;
  func.walk([&](graph::LabelFractionOp op) {
    copies[{op.getLoc().getAsOpaquePointer(), op.getIgnoreIndexAttr().getAsOpaquePointer()}]
        .push_back(op);
  });
  OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
  for (auto& [key, ops] : copies) {
    if (static_cast<int64_t>(ops.size()) != k) continue;
    Attribute stage = ops.front()->getAttr(dist::kStageAttr);
    auto place = [&](Operation* op) {
      if (!stage) return;
      op->setAttr(dist::kStageAttr, stage);
      op->setAttr(dist::kMicroBatchAttr, b.getI64IntegerAttr(0));
    };
    Value sum;
    for (graph::LabelFractionOp op : ops) {
      IRMapping map;
      cloneFromArguments(b, op.getLabels(), map, place);
      if (op.getWeight()) cloneFromArguments(b, op.getWeight(), map, place);
      Operation* early = b.clone(*op, map);
      place(early);
      if (!sum) {
        sum = early->getResult(0);
        continue;
      }
      auto add = graph::AddOp::create(b, op.getLoc(), sum, early->getResult(0));
      place(add);
      sum = add.getResult();
    }
    auto mean = graph::ScaleOp::create(b, ops.front().getLoc(), sum,
                                       b.getF32FloatAttr(1.0f / static_cast<float>(k)));
    place(mean);
    for (graph::LabelFractionOp op : ops) {
      op.getFraction().replaceAllUsesWith(mean.getResult());
      op.erase();
    }
  }
}

struct AccumulatePass : public impl::AccumulateBase<AccumulatePass> {
  using AccumulateBase::AccumulateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (microBatches < 1) {
      module.emitError("gradient accumulation needs at least 1 micro-batch, got ")
          << static_cast<int64_t>(microBatches);
      return signalPassFailure();
    }
    if (microBatches == 1) return;
    auto grad = module.lookupSymbol<func::FuncOp>(fn::kGrad);
    if (!grad) {
      module.emitError("dtc-accumulate: the module has no @grad function (run dtc-autodiff first)");
      return signalPassFailure();
    }
    const int64_t k = microBatches;
    // A pipeline schedules ops by micro-batch; other plans' IR stays free of the mark.
    const bool pipelined = module->hasAttr(dist::kPipelineAttr);
    OpBuilder b(grad);
    Builder& builder = b;

    // Arguments: each data input once per micro-batch, in place.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    SmallVector<SmallVector<unsigned>> newIndex(grad.getNumArguments());
    llvm::StringMap<unsigned> paramArg;
    for (BlockArgument arg : grad.getArguments()) {
      unsigned i = arg.getArgNumber();
      bool data = grad.getArgAttr(i, attr::kData) != nullptr;
      if (auto p = grad.getArgAttrOfType<StringAttr>(i, attr::kParam)) paramArg[p.getValue()] = i;
      for (int64_t m = 0; m < (data ? k : 1); ++m) {
        newIndex[i].push_back(argTypes.size());
        argTypes.push_back(arg.getType());
        NamedAttrList attrs(grad.getArgAttrDict(i));
        if (data) attrs.set(attr::kMicroBatch, builder.getI64IntegerAttr(m));
        argAttrs.push_back(attrs.getDictionary(module.getContext()));
      }
    }
    auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    // Result r of the forward pass that updates parameter argument (BatchNorm statistics).
    DenseMap<unsigned, unsigned> updatesArg;
    SmallVector<bool> summed(ret.getNumOperands(), false);
    // @grad returns the loss first (dtc-autodiff), then gradients, then buffer updates.
    for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
      summed[r] = r == 0 || grad.getResultAttr(r, attr::kGradOf) != nullptr;
      if (auto upd = grad.getResultAttrOfType<StringAttr>(r, attr::kUpdates))
        if (auto it = paramArg.find(upd.getValue()); it != paramArg.end())
          updatesArg[r] = it->second;
    }

    auto func = func::FuncOp::create(b, grad.getLoc(), "grad",
                                     b.getFunctionType(argTypes, grad.getResultTypes()));
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(grad.getAllResultAttrs());
    Block* body = func.addEntryBlock();
    b.setInsertionPointToStart(body);

    SmallVector<Value> results(ret.getNumOperands());
    std::map<unsigned, std::map<int64_t, Value>> stageSums;  // result -> stage -> running sum
    DenseMap<unsigned, Value>
        carried;  // parameter argument -> its value after the last micro-batch
    for (int64_t m = 0; m < k; ++m) {
      IRMapping map;
      for (BlockArgument arg : grad.getArguments()) {
        unsigned i = arg.getArgNumber();
        Value v = body->getArgument(newIndex[i][newIndex[i].size() == 1 ? 0 : m]);
        if (auto it = carried.find(i); it != carried.end()) v = it->second;
        map.map(arg, v);
      }
      for (Operation& op : grad.getBody().front().without_terminator()) {
        Operation* clone = b.clone(op, map);
        scaleSeed(clone, k);
        if (pipelined) clone->setAttr(dist::kMicroBatchAttr, builder.getI64IntegerAttr(m));
        // Micro-batch m's rows follow the earlier ones' in the step's batch: so do its draws.
        if (auto dropout = dyn_cast<graph::DropoutOp>(clone)) dropout.setMicroBatch(m);
      }
      for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
        Value v = map.lookup(ret.getOperand(r));
        if (pipelined && r > 0 && summed[r]) {
          // A weight used on several stages (a tied embedding): each stage sums its own
          // contributions over the micro-batches, and the stages' sums meet once per step.
          for (auto& [stage, leaf] : contributionsByStage(v)) {
            Value& sum = stageSums[r][stage];
            if (sum) {
              auto add = graph::AddOp::create(b, leaf.getLoc(), sum, leaf);
              add->setAttr(attr::kMicroBatchSum, builder.getUnitAttr());
              sum = add;
            } else {
              sum = leaf;
            }
          }
          continue;
        }
        if (summed[r] && results[r]) {
          auto add = graph::AddOp::create(b, v.getLoc(), results[r], v);
          // ZeRO-2 reduces each micro-batch's term on its own rather than this sum.
          if (r > 0) add->setAttr(attr::kMicroBatchSum, builder.getUnitAttr());
          results[r] = add;
        } else
          results[r] = v;  // sums start here; everything else is the last micro-batch's
        if (auto it = updatesArg.find(r); it != updatesArg.end()) carried[it->second] = v;
      }
    }
    // The step's loss, the mean of the micro-batches' (unmarked, as their sum: a pipeline places
    // it by its operands).
    results[0] = graph::ScaleOp::create(b, ret.getLoc(), results[0],
                                        b.getF32FloatAttr(1.0f / static_cast<float>(k)));
    for (auto& [r, sums] : stageSums) {
      // On the stage holding the parameter, in its last backward unit.
      auto param = grad.getResultAttrOfType<StringAttr>(r, attr::kGradOf);
      Attribute home;
      for (BlockArgument arg : grad.getArguments())
        if (grad.getArgAttr(arg.getArgNumber(), attr::kParam) == param)
          home = grad.getArgAttr(arg.getArgNumber(), dist::kStageAttr);
      for (auto& [stage, sum] : sums) {
        if (!results[r]) {
          results[r] = sum;
          continue;
        }
        auto add = graph::AddOp::create(b, sum.getLoc(), results[r], sum);
        add->setAttr(dist::kBackwardAttr, builder.getUnitAttr());
        add->setAttr(dist::kMicroBatchAttr, builder.getI64IntegerAttr(k - 1));
        if (home) add->setAttr(dist::kStageAttr, home);
        results[r] = add;
      }
    }
    averageLabelFractions(func, k);
    func::ReturnOp::create(b, ret.getLoc(), results);
    grad.erase();
    module->setAttr(attr::kMicroBatches, builder.getI64IntegerAttr(k));
  }
};

}  // namespace
}  // namespace dtc
