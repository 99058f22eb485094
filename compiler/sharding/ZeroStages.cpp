// dtc-zero: ZeRO stages 2 and 3 on partitioned programs (see Passes.td).
//
// Stage 1 (dtc-data-parallel) already leaves each optimizer update working on a dp-shard: the
// partitioner slices the parameter for it, reduce-scatters the gradient into it and all-gathers
// the new parameter. Stage 3 keeps the parameter at rest as that shard and replays the
// all-gather before each use instead; stage 2 reduce-scatters every micro-batch's gradient as
// it is produced rather than their sum.
#include "llvm/ADT/MapVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

#include "FunctionAttrs.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "pipeline_parallel/Pipeline.h"
#include "training/RecomputeModes.h"

namespace dtc {
#define GEN_PASS_DEF_ZERO
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

bool isUpdate(Operation* op) { return graph::isOptimizerUpdate(op); }

// Ops that only move one tensor's elements between layouts: what the partitioner puts between
// a parameter and its update, and between the update and the whole new parameter.
bool isLayoutStep(Operation* op) {
  return op && op->getNumOperands() == 1 && op->getNumResults() == 1 &&
         isa<graph::ReshapeOp, dist::LocalSliceOp, dist::AllGatherOp>(op);
}

// The layout steps from `from` to `to` (`to` reached from `from` through them), in order.
std::optional<SmallVector<Operation*>> layoutChain(Value from, Value to) {
  SmallVector<Operation*> chain;
  for (Value v = to; v != from;) {
    Operation* def = v.getDefiningOp();
    if (!isLayoutStep(def)) return std::nullopt;
    chain.push_back(def);
    v = def->getOperand(0);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// Where an op runs in a step: forward or backward, which micro-batch, which pipeline stage.
// A parameter is gathered once per phase that reads it, and the gathered copy lives only there.
struct Phase {
  bool backward = false;
  int64_t microBatch = -1;
  int64_t stage = -1;
  bool operator<(const Phase& o) const {
    return std::tie(stage, microBatch, backward) < std::tie(o.stage, o.microBatch, o.backward);
  }
};

// Backward: as backwardOps finds it. Micro-batch: the latest one among the data an op reads.
// Stage: the pipeline's mark, where there is one.
DenseMap<Operation*, Phase> phasesOf(func::FuncOp func) {
  const DenseSet<Operation*> backward = backwardOps(func.getBody().front());
  DenseMap<Value, Phase> ofValue;
  for (BlockArgument arg : func.getArguments())
    if (auto mb = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), attr::kMicroBatch))
      ofValue[arg].microBatch = mb.getInt();
  DenseMap<Operation*, Phase> ofOp;
  for (Operation& op : func.getBody().front()) {
    Phase p;
    p.backward = backward.contains(&op);
    for (Value operand : op.getOperands())
      if (auto it = ofValue.find(operand); it != ofValue.end())
        p.microBatch = std::max(p.microBatch, it->second.microBatch);
    if (auto stage = op.getAttrOfType<IntegerAttr>(dist::kStageAttr)) p.stage = stage.getInt();
    ofOp[&op] = p;
    for (Value r : op.getResults()) ofValue[r] = p;
  }
  return ofOp;
}

struct ZeroPass : public impl::ZeroBase<ZeroPass> {
  using ZeroBase::ZeroBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stage < 2 || stage > 3) {
      module.emitError("dtc-zero handles ZeRO stages 2 and 3, got ") << static_cast<int64_t>(stage);
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) scatterEachMicroBatch(func);
    if (stage == 3) shardParameters(module);
  }

  // ---- stage 2 ----------------------------------------------------------------------------

  // reduce_scatter(layout(g0 + g1 + …)) becomes Σ reduce_scatter(layout(g_k)), each right
  // after its term: only the shard of the running sum outlives a micro-batch.
  void scatterEachMicroBatch(func::FuncOp func) {
    SmallVector<dist::ReduceScatterOp> scatters;
    func.walk([&](dist::ReduceScatterOp op) { scatters.push_back(op); });
    for (dist::ReduceScatterOp scatter : scatters) {
      SmallVector<Operation*> layout;  // reshapes between the sum and the scatter
      Value v = scatter.getX();
      while (auto reshape = v.getDefiningOp<graph::ReshapeOp>()) {
        if (!reshape->hasOneUse()) break;
        layout.push_back(reshape);
        v = reshape.getX();
      }
      auto sum = v.getDefiningOp<graph::AddOp>();
      if (!sum || !sum->hasAttr(attr::kMicroBatchSum) || !sum->hasOneUse()) continue;
      std::reverse(layout.begin(), layout.end());
      SmallVector<Value> terms;
      collectTerms(sum.getResult(), terms);
      // In program order: the running sum of shards grows as the micro-batches go.
      llvm::stable_sort(terms, [](Value a, Value b) {
        Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
        return x && y && x->isBeforeInBlock(y);
      });
      Value total;
      for (Value term : terms) {
        OpBuilder at = OpBuilder::atBlockBegin(&func.getBody().front());
        if (Operation* def = term.getDefiningOp()) at.setInsertionPointAfter(def);
        if (Operation* def = total ? total.getDefiningOp() : nullptr;
            def && at.getInsertionPoint() != at.getBlock()->end() &&
            at.getInsertionPoint()->isBeforeInBlock(def))
          at.setInsertionPointAfter(def);
        IRMapping map;
        map.map(v, term);
        for (Operation* step : layout) at.clone(*step, map);
        Operation* part = at.clone(*scatter, map);
        if (total) {
          auto add = graph::AddOp::create(at, scatter.getLoc(), total, part->getResult(0));
          pipeline::copyPlacement(part, add);
          total = add;
        } else {
          total = part->getResult(0);
        }
      }
      scatter.getResult().replaceAllUsesWith(total);
      scatter.erase();
      for (Operation* step : llvm::reverse(layout)) step->erase();
      eraseSumTree(sum);
    }
  }

  static void collectTerms(Value v, SmallVectorImpl<Value>& terms) {
    auto add = v.getDefiningOp<graph::AddOp>();
    if (add && add->hasAttr(attr::kMicroBatchSum) && add->hasOneUse()) {
      collectTerms(add.getLhs(), terms);
      collectTerms(add.getRhs(), terms);
      return;
    }
    terms.push_back(v);
  }

  static void eraseSumTree(graph::AddOp add) {
    if (!add->use_empty()) return;
    Value lhs = add.getLhs(), rhs = add.getRhs();
    add.erase();
    for (Value v : {lhs, rhs})
      if (auto inner = v.getDefiningOp<graph::AddOp>();
          inner && inner->hasAttr(attr::kMicroBatchSum))
        eraseSumTree(inner);
  }

  // ---- stage 3 ----------------------------------------------------------------------------

  // How one parameter is kept: its update's shard at rest, and the steps that rebuild the
  // whole (device-local) tensor from it.
  struct AtRest {
    RankedTensorType shardType;
    Attribute sharding;
    SmallVector<Operation*> gather;  // from the shard to the whole, e.g. all_gather (+ reshapes)
  };

  void shardParameters(ModuleOp module) {
    llvm::StringMap<AtRest> atRest;
    SmallVector<Attribute> whole;  // trainable parameters that stay whole, for the report
    for (auto func : module.getOps<func::FuncOp>()) {
      bool updates = false;
      func.walk([&](Operation* op) { updates |= isUpdate(op); });
      if (!updates) continue;
      shardUpdated(func, atRest);
      for (BlockArgument arg : func.getArguments())
        if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam);
            name && func.getArgAttr(arg.getArgNumber(), attr::kTrainable) &&
            !atRest.count(name.getValue()))
          whole.push_back(name);
    }
    if (!whole.empty()) module->setAttr(dist::kZeroWholeAttr, ArrayAttr::get(&getContext(), whole));
    // Other functions (evaluation) read the parameters where the step leaves them.
    for (auto func : module.getOps<func::FuncOp>()) {
      FunctionAttrEdits edits(func);
      std::optional<DenseMap<Operation*, Phase>> phases;
      for (BlockArgument arg : func.getArguments()) {
        auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam);
        if (!name || !atRest.count(name.getValue()) ||
            arg.getType() == atRest[name.getValue()].shardType)
          continue;
        const AtRest& rest = atRest[name.getValue()];
        if (!phases) phases = phasesOf(func);
        gatherForUses(arg, rest, *phases);
        arg.setType(rest.shardType);
        edits.setArgAttr(arg.getArgNumber(), dist::kShardingAttr, rest.sharding);
      }
      edits.apply();
      updateFunctionType(func);
      prefetch();
    }
    for (Operation* op : llvm::reverse(unused_))
      if (op->use_empty()) op->erase();
  }

  void shardUpdated(func::FuncOp func, llvm::StringMap<AtRest>& atRest) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    FunctionAttrEdits edits(func);
    // The gathers this adds read only arguments: the phases of the other ops stay as they are.
    const DenseMap<Operation*, Phase> phases = phasesOf(func);
    for (BlockArgument arg : func.getArguments()) {
      const unsigned i = arg.getArgNumber();
      auto name = func.getArgAttrOfType<StringAttr>(i, attr::kParam);
      if (!name || !func.getArgAttr(i, attr::kTrainable)) continue;
      // The update that reads a dp-shard of this parameter (the shard: `slice`).
      Operation* update = nullptr;
      std::optional<SmallVector<Operation*>> slicing;
      func.walk([&](Operation* op) {
        if (update || !isUpdate(op)) return;
        slicing = layoutChain(arg, op->getOperand(0));
        if (slicing && !slicing->empty()) update = op;
      });
      if (!update) continue;  // not sharded for its update (no dimension divides): replicated
      Value slice = update->getOperand(0);
      // The new parameter as computed on the shard (the update's, or loss scaling's choice
      // between it and the old shard), and the steps that gather it for the result.
      std::optional<unsigned> result;
      for (unsigned r = 0; r < func.getNumResults(); ++r)
        if (func.getResultAttr(r, attr::kUpdates) == name) result = r;
      if (!result) continue;
      Value newShard = ret.getOperand(*result);
      while (isLayoutStep(newShard.getDefiningOp()))
        newShard = newShard.getDefiningOp()->getOperand(0);
      std::optional<SmallVector<Operation*>> gather =
          layoutChain(newShard, ret.getOperand(*result));
      Operation* producer = newShard.getDefiningOp();
      auto shardings =
          producer ? producer->getAttrOfType<ArrayAttr>(dist::kShardingsAttr) : ArrayAttr();
      if (!gather || gather->empty() || newShard.getType() != slice.getType() || !shardings ||
          shardings.empty())
        continue;

      AtRest rest{cast<RankedTensorType>(slice.getType()),
                  shardings[cast<OpResult>(newShard).getResultNumber()], *gather};
      // Every phase but the optimizer's gathers the whole parameter; the optimizer reads the
      // shard at rest and returns its new value as it is. The gathering steps stay (unused)
      // until every function has copied them.
      gatherForUses(arg, rest, phases, slicing->front());
      arg.setType(rest.shardType);
      slice.replaceAllUsesWith(arg);
      ret.setOperand(*result, newShard);
      unused_.append(gather->begin(), gather->end());
      for (Operation* step : llvm::reverse(*slicing))
        if (step->use_empty()) step->erase();
      edits.setArgAttr(i, dist::kShardingAttr, rest.sharding);
      edits.setResultAttr(*result, dist::kShardingAttr, rest.sharding);
      atRest[name.getValue()] = std::move(rest);
    }
    edits.apply();
    updateFunctionType(func);
    prefetch();
  }

  // Each phase reading `arg` (but `slicing`, the optimizer's way to the shard) gets a gather,
  // issued at the previous gather's first use in the same pipeline unit: one parameter ahead,
  // so that on a GPU the comm stream fetches it while compute uses the one before. A cast of
  // the parameter (mixed precision's 16-bit weight) is looked through: its readers are what
  // have phases, and each phase casts its own gathered copy. Taken as the reader itself, the
  // cast reads no data, so every micro-batch's cast fell in the first forward phase: one gather
  // served the whole step, and the backward read the forward's 16-bit copy, so the whole
  // weights lived from the first forward to the last backward.
  void gatherForUses(BlockArgument arg, const AtRest& rest,
                     const DenseMap<Operation*, Phase>& phases, Operation* slicing = nullptr) {
    using Key = std::pair<Phase, Operation*>;  // the phase, and the cast it reads through
    llvm::MapVector<Key, SmallVector<OpOperand*>, std::map<Key, unsigned>> byPhase;
    SmallVector<Operation*> casts;
    for (OpOperand& use : arg.getUses()) {
      Operation* owner = use.getOwner();
      if (owner == slicing) continue;
      if (isa<graph::CastOp>(owner) && !owner->use_empty()) {
        casts.push_back(owner);
        for (OpOperand& read : owner->getUses())
          byPhase[{phases.lookup(read.getOwner()), owner}].push_back(&read);
        continue;
      }
      byPhase[{phases.lookup(owner), nullptr}].push_back(&use);
    }
    for (auto& [key, uses] : byPhase) {
      Operation* first = uses.front()->getOwner();
      for (OpOperand* use : uses)
        if (use->getOwner()->isBeforeInBlock(first)) first = use->getOwner();
      OpBuilder b(first);
      IRMapping map;
      map.map(rest.gather.front()->getOperand(0), arg);
      Gather g{first, {}};
      for (Operation* step : rest.gather) {
        g.steps.push_back(b.clone(*step, map));
        pipeline::copyPlacement(first, g.steps.back());
      }
      if (Operation* cast = key.second) {
        map.map(arg, g.steps.back()->getResult(0));
        g.steps.push_back(b.clone(*cast, map));
        pipeline::copyPlacement(first, g.steps.back());
      }
      for (OpOperand* use : uses) use->set(g.steps.back()->getResult(0));
      gathers_.push_back(std::move(g));
    }
    for (Operation* cast : casts)
      if (cast->use_empty()) cast->erase();
  }

  // Moves each gather (but the first) before the first use of the one that precedes it in the
  // same pipeline unit.
  void prefetch() {
    llvm::stable_sort(gathers_, [](const Gather& a, const Gather& b) {
      return a.firstUse != b.firstUse && a.firstUse->isBeforeInBlock(b.firstUse);
    });
    auto unit = [](Operation* op) {
      return std::make_tuple(op->getAttr(dist::kStageAttr), op->getAttr(dist::kMicroBatchAttr),
                             op->hasAttr(dist::kBackwardAttr));
    };
    for (size_t i = gathers_.size(); i-- > 1;) {
      Operation* earlier = gathers_[i - 1].firstUse;
      if (earlier == gathers_[i].firstUse || unit(earlier) != unit(gathers_[i].firstUse)) continue;
      for (Operation* step : gathers_[i].steps) step->moveBefore(earlier);
    }
    gathers_.clear();
  }

  static void updateFunctionType(func::FuncOp func) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    func.setType(FunctionType::get(func.getContext(), func.getBody().front().getArgumentTypes(),
                                   ret.getOperandTypes()));
  }

  // A parameter's gather for one phase, where it was first placed.
  struct Gather {
    Operation* firstUse;
    SmallVector<Operation*> steps;
  };
  std::vector<Gather> gathers_;     // of the function being rewritten
  SmallVector<Operation*> unused_;  // the update's gathers, erased once every copy is made
};

}  // namespace
}  // namespace dtc
