// dtc-expert-parallel: mixture-of-experts layers split over an `ep` mesh axis (see Passes.td).
#include "llvm/ADT/StringSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "FunctionAttrs.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_EXPERTPARALLEL
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

constexpr const char kAxis[] = "ep";

struct ExpertParallelPass : public impl::ExpertParallelBase<ExpertParallelPass> {
  using ExpertParallelBase::ExpertParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    if (!mesh || mesh.axisIndex(kAxis) < 0 || mesh.axisSize(kAxis) != ep) {
      module.emitError("expert parallelism needs a mesh axis ep of ")
          << static_cast<int64_t>(ep) << " devices (--mesh ep=N)";
      return signalPassFailure();
    }
    bool any = false;
    module.walk([&](graph::MoeDispatchOp) { any = true; });
    if (!any) {
      module.emitError("mesh axis ep splits nothing: the model has no mixture-of-experts layer");
      return signalPassFailure();
    }
    llvm::StringSet<> experts;
    for (auto func : module.getOps<func::FuncOp>())
      for (BlockArgument arg : func.getArguments())
        if (func.getArgAttr(arg.getArgNumber(), attr::kExpert))
          if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
            experts.insert(name.getValue());
    batchAxes_ = dataAxes(mesh);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(splitTokens(func, mesh)) || failed(splitExperts(func, experts)) ||
          failed(placeExperts(func)))
        return signalPassFailure();
    // What the layout does to the experts, said once (dtc compile prints the remark).
    int64_t layers = 0, perLayer = 0;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.getSymName() == fn::kTrainStep)
        func.walk([&](graph::MoeDispatchOp op) {
          ++layers;
          perLayer = cast<RankedTensorType>(op.getBuffer().getType()).getDimSize(0);
        });
    std::string axes;
    for (Attribute a : batchAxes_)
      axes += (axes.empty() ? "" : " x ") + cast<StringAttr>(a).getValue().str();
    if (layers > 0)
      module.emitRemark() << "expert parallel over ep (" << static_cast<int64_t>(ep)
                          << " devices): " << layers << " mixture-of-experts layer(s) of "
                          << perLayer << " experts, " << perLayer / ep
                          << " on each device; the batch split over " << axes
                          << "; each layer's dispatch and combine one all-to-all over ep";
  }

  // The axes a batch splits over: the data axes the mesh has (dp_replicate outside dp), then ep.
  ArrayAttr dataAxes(dist::MeshAttr mesh) {
    Builder b(mesh.getContext());
    SmallVector<Attribute> axes;
    for (const char* axis : {"dp_replicate", "dp", kAxis})
      if (mesh.axisIndex(axis) >= 0) axes.push_back(b.getStringAttr(axis));
    return b.getArrayAttr(axes);
  }

  // The experts' weights and their optimizer state ("<param>.<slot>") split by experts over
  // ep, whatever else splits them (a tensor-parallel split of their other dimensions stays):
  // annotated here, ahead of dp, so that ZeRO adds dp to them as to any annotated parameter.
  LogicalResult splitExperts(func::FuncOp func, const llvm::StringSet<>& experts) {
    Builder b(func.getContext());
    FunctionAttrEdits edits(func);
    for (BlockArgument arg : func.getArguments()) {
      const unsigned i = arg.getArgNumber();
      StringRef owner;
      if (auto param = func.getArgAttrOfType<StringAttr>(i, attr::kParam))
        owner = param.getValue();
      else if (auto state = func.getArgAttrOfType<StringAttr>(i, attr::kState))
        owner = state.getValue().rsplit('.').first;
      auto type = cast<RankedTensorType>(arg.getType());
      if (owner.empty() || !experts.contains(owner) || type.getRank() == 0) continue;
      if (type.getDimSize(0) % ep != 0)
        return func.emitError("the mixture of experts' ")
               << type.getDimSize(0)
               << " experts do not divide over ep=" << static_cast<int64_t>(ep) << " (tensor '"
               << owner << "')";
      auto own = func.getArgAttrOfType<dist::ShardingAttr>(i, dist::kShardingAttr);
      if (!own) own = dist::ShardingAttr::replicated(b.getContext(), type.getRank());
      SmallVector<Attribute> dims(own.getDims().begin(), own.getDims().end());
      SmallVector<Attribute> axes{b.getStringAttr(kAxis)};
      axes.append(own.dimAxes(0).begin(), own.dimAxes(0).end());
      dims[0] = b.getArrayAttr(axes);
      edits.setArgAttr(
          i, dist::kShardingAttr,
          dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), own.getPartial()));
    }
    edits.apply();
    return success();
  }

  // Tokens split over the data axes and ep (minor-most, so that the all-to-all moves ep alone):
  // ep's devices each read their own samples, as dp's do. Set ahead of dp, which keeps it.
  LogicalResult splitTokens(func::FuncOp func, dist::MeshAttr mesh) {
    Builder b(func.getContext());
    FunctionAttrEdits edits(func);
    const int64_t devices = mesh.groupSize(batchAxes_);
    for (BlockArgument arg : func.getArguments()) {
      const unsigned i = arg.getArgNumber();
      auto data = func.getArgAttrOfType<StringAttr>(i, attr::kData);
      auto type = cast<RankedTensorType>(arg.getType());
      if (!data || type.getRank() == 0) continue;
      int64_t dim = 0;
      if (auto bd = func.getArgAttrOfType<IntegerAttr>(i, attr::kBatchDim)) dim = bd.getInt();
      if (type.getDimSize(dim) % devices != 0)
        return func.emitError("the batch of ")
               << type.getDimSize(dim) << " samples (input '" << data.getValue()
               << "') does not divide over " << devices << " devices (the data axes and ep)";
      SmallVector<Attribute> dims(type.getRank(), b.getArrayAttr({}));
      dims[dim] = batchAxes_;
      edits.setArgAttr(
          i, dist::kShardingAttr,
          dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), b.getArrayAttr({})));
    }
    edits.apply();
    return success();
  }

  // A buffer [E, G, C, D] laid out by groups (as the tokens it came from), or by experts (as
  // the experts' weights): the all-to-all between the two moves ep from G to E.
  dist::ShardingAttr bufferLayout(MLIRContext* ctx, bool byExperts) {
    Builder b(ctx);
    SmallVector<Attribute> groups;
    for (Attribute a : batchAxes_)
      if (!byExperts || cast<StringAttr>(a).getValue() != kAxis) groups.push_back(a);
    SmallVector<Attribute> experts;
    if (byExperts) experts.push_back(b.getStringAttr(kAxis));
    SmallVector<Attribute> dims{b.getArrayAttr(experts), b.getArrayAttr(groups), b.getArrayAttr({}),
                                b.getArrayAttr({})};
    return dist::ShardingAttr::get(ctx, b.getArrayAttr(dims), b.getArrayAttr({}));
  }

  // Pins `v` to a layout for every user of it in `users` (all users when empty).
  void reshardUses(Value v, bool byExperts, ArrayRef<Operation*> users = {}) {
    OpBuilder b(v.getContext());
    b.setInsertionPointAfterValue(v);
    Value pinned =
        dist::ReshardOp::create(b, v.getLoc(), v, bufferLayout(v.getContext(), byExperts));
    v.replaceUsesWithIf(pinned, [&](OpOperand& use) {
      return use.getOwner() != pinned.getDefiningOp() &&
             (users.empty() || llvm::is_contained(users, use.getOwner()));
    });
  }

  // The experts' side of each layer is laid out by experts, its tokens' side by groups: the
  // partitioner turns each change into one all-to-all over ep (dispatch, combine and their
  // gradients), and propagation splits the experts' weights and their state over ep.
  LogicalResult placeExperts(func::FuncOp func) {
    SmallVector<Operation*> ops;
    func.walk([&](Operation* op) {
      if (isa<graph::MoeDispatchOp, graph::MoeDispatchGradOp, graph::MoeCombineOp,
              graph::MoeCombineGradOp>(op))
        ops.push_back(op);
    });
    for (Operation* op : ops) {
      Value buffer = isa<graph::MoeDispatchOp>(op)      ? op->getResult(0)
                     : isa<graph::MoeCombineGradOp>(op) ? op->getOperand(1)
                                                        : op->getOperand(0);
      const int64_t experts = cast<RankedTensorType>(buffer.getType()).getDimSize(0);
      if (experts % ep != 0)
        return op->emitError("the mixture of experts' ")
               << experts << " experts do not divide over ep=" << static_cast<int64_t>(ep);
      if (auto dispatch = dyn_cast<graph::MoeDispatchOp>(op)) {
        reshardUses(dispatch.getBuffer(), /*byExperts=*/true);
      } else if (auto grad = dyn_cast<graph::MoeCombineGradOp>(op)) {
        reshardUses(grad.getBuffer(), /*byExperts=*/false, {op});
        reshardUses(grad.getDbuffer(), /*byExperts=*/true);
      } else {
        reshardUses(op->getOperand(0), /*byExperts=*/false, {op});
      }
    }
    return success();
  }

  ArrayAttr batchAxes_;
};

}  // namespace
}  // namespace dtc
