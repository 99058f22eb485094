// dtc-recompute-gathers: an activation's all-gather issued again for the backward (see
// Passes.td).
//
// Sequence parallelism keeps a projection's input sharded along the sequence and gathers it
// right before the contraction. The weight gradient reads the gathered copy too, so without
// this pass each layer keeps its gathered inputs (t times the sharded bytes) from the forward
// to the backward. Megatron keeps the shard and gathers again in the backward, overlapped with
// the input gradient's contraction; this pass does the same on the partitioned programs.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "pipeline_parallel/Pipeline.h"
#include "training/RecomputeModes.h"

namespace dtc {
#define GEN_PASS_DEF_RECOMPUTEGATHERS
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// A gather of what a function argument holds (a parameter under ZeRO-3 or a tensor-parallel
// layout, or a data input) is not an activation: dtc-zero decides where parameters are gathered.
bool gathersArgument(dist::AllGatherOp gather) {
  Value v = gather->getOperand(0);
  while (Operation* def = v.getDefiningOp()) {
    if (!isa<graph::CastOp, graph::ReshapeOp>(def)) return false;
    v = def->getOperand(0);
  }
  return true;
}

struct RecomputeGathersPass : impl::RecomputeGathersBase<RecomputeGathersPass> {
  using RecomputeGathersBase::RecomputeGathersBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<RecomputeModes> modes = RecomputeModes::parse(module, mode);
    if (failed(modes)) return signalPassFailure();
    modes_ = std::move(*modes);
    module.walk([&](func::FuncOp f) {
      if (!f.getBody().empty()) runOn(f.getBody().front());
    });
  }

  bool recomputes(Operation* op) const {
    const std::string& m = modes_->of(op);
    return m == "full" || m == "selective";
  }

  void runOn(Block& body) {
    DenseSet<Operation*> backward = backwardOps(body);
    if (backward.empty()) return;  // evaluation keeps nothing for a backward
    SmallVector<dist::AllGatherOp> gathers;
    for (Operation& op : body)
      if (auto g = dyn_cast<dist::AllGatherOp>(op);
          g && !backward.count(&op) && !gathersArgument(g) && recomputes(&op))
        gathers.push_back(g);
    for (dist::AllGatherOp g : gathers) regather(g, backward);
  }

  // The backward's reads of the gathered tensor are served by a copy of the gather, issued
  // where the backward starts using the first reader's other operands (its incoming gradient):
  // the gather then runs beside the contraction that computes the input gradient, as
  // Megatron's does, and the forward's gathered copy dies in the forward.
  void regather(dist::AllGatherOp gather, const DenseSet<Operation*>& backward) {
    SmallVector<OpOperand*> reads;
    for (OpOperand& use : gather->getResult(0).getUses())
      if (backward.count(use.getOwner())) reads.push_back(&use);
    if (reads.empty()) return;
    Operation* first = reads.front()->getOwner();
    for (OpOperand* use : reads)
      if (use->getOwner()->isBeforeInBlock(first)) first = use->getOwner();
    Operation* anchor = first;
    for (Value other : first->getOperands()) {
      Operation* def = other.getDefiningOp();
      if (other == gather->getResult(0) || !def || !backward.count(def)) continue;
      for (Operation* user : other.getUsers())
        if (user->getBlock() == first->getBlock() && user->isBeforeInBlock(anchor) &&
            pipeline::stageOf(user) == pipeline::stageOf(first) &&
            pipeline::microBatchOf(user) == pipeline::microBatchOf(first))
          anchor = user;
    }
    OpBuilder b(anchor);
    Operation* copy = b.clone(*gather);
    copy->setAttr(attr::kRecomputed, b.getUnitAttr());
    pipeline::copyPlacement(first, copy);
    for (OpOperand* use : reads) use->set(copy->getResult(0));
    if (gather->use_empty()) gather->erase();
  }

  std::optional<RecomputeModes> modes_;
};

}  // namespace
}  // namespace dtc
