// dtc-recompute: activation recomputation in @grad (see Passes.td).
#include <map>

#include "llvm/ADT/MapVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include "Locations.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "model/LayerStack.h"
#include "pipeline_parallel/Pipeline.h"
#include "planfile/function_names.h"
#include "training/RecomputeModes.h"

namespace dtc {
#define GEN_PASS_DEF_RECOMPUTE
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

using Group = SmallVector<Operation*>;

// full: each layer's forward ops, in program order. A layer that a pipeline cuts between two
// stages (or chunks) is two groups: each stage recomputes only its own part (a copy of the other
// part would wait for a transfer that never comes).
std::vector<Group> layers(ArrayRef<Operation*> forward) {
  llvm::MapVector<std::string, Group, std::map<std::string, unsigned>> byLayer;
  for (Operation* op : forward)
    if (std::string layer = layerOf(locationName(op->getLoc())); !layer.empty()) {
      if (auto stage = op->getAttrOfType<IntegerAttr>(dist::kStageAttr))
        layer += "@" + std::to_string(stage.getInt());
      byLayer[layer].push_back(op);
    }
  std::vector<Group> groups;
  for (auto& [layer, ops] : byLayer) groups.push_back(std::move(ops));
  return groups;
}

// selective: attention's core, Megatron's choice — the [.., T, T] scores and probabilities
// (the q·kᵀ product, what lies between it and the softmax, the softmax and a dropout of it),
// which cost the most memory per flop to keep. In mixed precision the product is widened to f32
// for the softmax and the probabilities narrowed again for the product with v: those casts are
// part of the core too, or their [.., T, T] results would be kept.
std::vector<Group> attentionCores(ArrayRef<Operation*> forward,
                                  const DenseSet<Operation*>& backward) {
  std::vector<Group> groups;
  for (Operation* op : forward) {
    if (!isa<graph::CausalSoftmaxOp, graph::SoftmaxOp>(op)) continue;
    Group core;
    for (Operation* p = op->getOperand(0).getDefiningOp(); p && core.size() < 5;
         p = p->getNumOperands() ? p->getOperand(0).getDefiningOp() : nullptr) {
      if (!isa<graph::BatchMatmulOp, graph::ScaleOp, graph::AddOp, graph::CastOp>(p) ||
          !p->hasOneUse())
        break;
      core.push_back(p);
      if (isa<graph::BatchMatmulOp>(p)) break;
    }
    if (core.empty() || !isa<graph::BatchMatmulOp>(core.back())) continue;
    std::reverse(core.begin(), core.end());
    core.push_back(op);
    // What the forward alone does with the probabilities next: a dropout of them, a cast of
    // them, or both (the backward reads them too; those reads are what recomputation serves).
    for (Operation* last = op; core.size() < 8;) {
      Operation* next = nullptr;
      int users = 0;
      for (Operation* user : last->getUsers())
        if (!backward.count(user)) next = user, ++users;
      if (users != 1 || !isa<graph::DropoutOp, graph::CastOp>(next)) break;
      core.push_back(next);
      last = next;
    }
    groups.push_back(std::move(core));
  }
  return groups;
}

struct RecomputePass : public impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<RecomputeModes> modes = RecomputeModes::parse(module, mode);
    if (failed(modes)) return signalPassFailure();
    if (modes->allNone()) return;
    auto grad = module.lookupSymbol<func::FuncOp>(fn::kGrad);
    if (!grad) {
      module.emitError("dtc-recompute: the module has no @grad function (run dtc-autodiff first)");
      return signalPassFailure();
    }
    Block& body = grad.getBody().front();
    const DenseSet<Operation*> backward = backwardOps(body);
    SmallVector<Operation*> forward;
    for (Operation& op : body.without_terminator())
      if (!backward.count(&op)) forward.push_back(&op);
    const bool pipelined = module->hasAttr(dist::kPipelineAttr);
    // Each group under its device's setting: layers where that is full, attention cores where
    // selective.
    std::vector<Group> groups;
    for (Group& g : layers(forward))
      if (modes->of(g.front()) == "full") groups.push_back(std::move(g));
    for (Group& g : attentionCores(forward, backward))
      if (modes->of(g.front()) == "selective") groups.push_back(std::move(g));
    DenseMap<Operation*, size_t> groupOf;
    for (size_t g = 0; g < groups.size(); ++g)
      for (Operation* op : groups[g]) groupOf[op] = g;
    for (size_t g = 0; g < groups.size(); ++g)
      recompute(groups[g], g, groupOf, backward, pipelined);
  }

  // Backward reads of what `group` computes are served by a copy of the group, computed again
  // right before the first of them; the forward's own values then die in the forward. Values
  // kept anyway stay as they are: another group's input (a layer's output is the next layer's
  // input, which that layer's copy reads) and the step's results.
  void recompute(const Group& group, size_t index, const DenseMap<Operation*, size_t>& groupOf,
                 const DenseSet<Operation*>& backward, bool pipelined) {
    SmallVector<OpOperand*> reads;
    for (Operation* op : group)
      for (Value r : op->getResults()) {
        bool kept = llvm::any_of(r.getUsers(), [&](Operation* user) {
          if (isa<func::ReturnOp>(user)) return true;
          auto it = groupOf.find(user);
          return it != groupOf.end() && it->second != index;
        });
        if (kept) continue;
        for (OpOperand& use : r.getUses())
          if (backward.count(use.getOwner())) reads.push_back(&use);
      }
    if (reads.empty()) return;
    Operation* first = reads.front()->getOwner();
    for (OpOperand* use : reads)
      if (use->getOwner()->isBeforeInBlock(first)) first = use->getOwner();
    OpBuilder b(first);
    IRMapping map;
    SmallVector<Operation*> copies;
    for (Operation* op : group) {
      Operation* copy = b.clone(*op, map);
      copy->setAttr(attr::kRecomputed, b.getUnitAttr());
      // A pipeline runs it in the backward unit of its stage (the stage mark is cloned).
      if (pipelined) copy->setAttr(dist::kBackwardAttr, b.getUnitAttr());
      copies.push_back(copy);
    }
    for (OpOperand* use : reads) use->set(map.lookup(use->get()));
    for (Operation* copy : llvm::reverse(copies))
      if (copy->use_empty()) copy->erase();
  }
};

}  // namespace
}  // namespace dtc
