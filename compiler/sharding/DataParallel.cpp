// dtc-data-parallel: the data-parallel strategy as annotations (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "FunctionAttrs.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "pipeline_parallel/Pipeline.h"

namespace dtc {
#define GEN_PASS_DEF_DATAPARALLEL
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

constexpr const char kAxis[] = "dp";
constexpr const char kReplicaAxis[] = "dp_replicate";  // hybrid sharding: ZeRO does not use it

struct DataParallelPass : public impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder b(module);
    if (dp < 1) {
      module.emitError("data parallelism needs dp >= 1, got ") << static_cast<int64_t>(dp);
      return signalPassFailure();
    }
    if (zero < 0 || zero > 3) {
      module.emitError("ZeRO stage ") << static_cast<int64_t>(zero) << " is not supported (0 to 3)";
      return signalPassFailure();
    }
    auto mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    if (mesh && mesh.axisIndex(kAxis) >= 0 && mesh.axisSize(kAxis) != dp) {
      module.emitError("the mesh's dp axis has ")
          << mesh.axisSize(kAxis) << " devices, not " << static_cast<int64_t>(dp);
      return signalPassFailure();
    }
    if (replicate > 0 &&
        (!mesh || mesh.axisIndex(kReplicaAxis) < 0 || mesh.axisSize(kReplicaAxis) != replicate)) {
      module.emitError("hybrid sharding needs the mesh's dp_replicate axis of ")
          << static_cast<int64_t>(replicate) << " devices (--mesh dp_replicate=R,dp=N)";
      return signalPassFailure();
    }
    if (!mesh || mesh.axisIndex(kAxis) < 0) {
      // dp is the outermost axis: data-parallel replicas are the farthest apart.
      SmallVector<Attribute> names{b.getStringAttr(kAxis)};
      SmallVector<int64_t> sizes{dp};
      if (mesh) {
        names.append(mesh.getNames().begin(), mesh.getNames().end());
        sizes.append(mesh.getSizes().asArrayRef().begin(), mesh.getSizes().asArrayRef().end());
      }
      mesh = dist::MeshAttr::get(module.getContext(), b.getArrayAttr(names),
                                 b.getDenseI64ArrayAttr(sizes));
      module->setAttr(dist::kMeshAttr, mesh);
    }
    // On a mesh with other axes, parameters the user did not annotate are left to propagation
    // (they may follow a tensor-parallel split); on a dp-only mesh they are replicated. A
    // pipeline's axis splits no tensor: a pp×dp mesh is dp-only for each stage's parameters.
    std::optional<pipeline::PipelineConfig> pipe = pipeline::getPipeline(module);
    const int64_t pipeAxes = pipe && mesh.axisIndex(pipe->axis) >= 0 ? 1 : 0;
    // Context parallelism replicates parameters as dp does: its axis counts as a data axis.
    const int64_t contextAxes = mesh.axisIndex("cp") >= 0 ? 1 : 0;
    bool onlyDp =
        static_cast<int64_t>(mesh.rank()) == (replicate > 0 ? 2 : 1) + pipeAxes + contextAxes;
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(annotate(func, b, onlyDp))) return signalPassFailure();
  }

  // The batch: split over dp, and over the replicas outside it (hybrid sharding).
  dist::ShardingAttr splitDim(Builder& b, int64_t rank, int64_t dim) {
    SmallVector<Attribute> dims(rank, b.getArrayAttr({}));
    SmallVector<Attribute> axes;
    if (replicate > 0) axes.push_back(b.getStringAttr(kReplicaAxis));
    axes.push_back(b.getStringAttr(kAxis));
    dims[dim] = b.getArrayAttr(axes);
    return dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), b.getArrayAttr({}));
  }

  // ZeRO-1: `base` (the state's sharding so far) with dp added, minor-most, to the first
  // dimension whose local size divides; `base` itself if none does.
  dist::ShardingAttr addDp(Builder& b, dist::MeshAttr mesh, RankedTensorType type,
                           dist::ShardingAttr base) {
    for (int64_t d = 0; d < type.getRank(); ++d) {
      int64_t local = type.getDimSize(d) / mesh.groupSize(base.dimAxes(d));
      if (local % (dp * base.dimBlocks(d)) != 0) continue;
      SmallVector<Attribute> dims(base.getDims().begin(), base.getDims().end());
      SmallVector<Attribute> axes(base.dimAxes(d).begin(), base.dimAxes(d).end());
      axes.push_back(b.getStringAttr(kAxis));
      dims[d] = b.getArrayAttr(axes);
      SmallVector<int64_t> blocks;
      for (int64_t k = 0; k < type.getRank(); ++k) blocks.push_back(base.dimBlocks(k));
      return dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), b.getArrayAttr({}),
                                     ArrayRef<int64_t>(blocks));
    }
    return base;
  }

  LogicalResult annotate(func::FuncOp func, Builder& b, bool onlyDp) {
    auto mesh = func->getParentOfType<ModuleOp>()->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    llvm::StringMap<dist::ShardingAttr> byName;
    DenseMap<Value, dist::ShardingAttr> paramSharding;  // ZeRO-2/3: each parameter's layout
    // Parameters already laid out (by the user, Megatron's preset, the vocabulary split): their
    // optimizer state ("<param>.<slot>") takes the same layout.
    llvm::StringMap<dist::ShardingAttr> annotatedParams;
    for (BlockArgument arg : func.getArguments())
      if (auto param = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
        if (auto s =
                func.getArgAttrOfType<dist::ShardingAttr>(arg.getArgNumber(), dist::kShardingAttr))
          annotatedParams[param.getValue()] = s;
    FunctionAttrEdits edits(func);
    // The axes the first data input's batch is split over: dp's, or what split it before
    // (expert parallelism's dp x ep). Per-sample outputs follow it.
    ArrayAttr batchAxes;
    auto noteBatch = [&](unsigned i, dist::ShardingAttr s) {
      if (batchAxes || !func.getArgAttr(i, attr::kData)) return;
      int64_t dim = 0;
      if (auto bd = func.getArgAttrOfType<IntegerAttr>(i, attr::kBatchDim)) dim = bd.getInt();
      if (dim < static_cast<int64_t>(s.getDims().size())) batchAxes = s.dimAxes(dim);
    };
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto type = cast<RankedTensorType>(arg.getType());
      auto user = func.getArgAttrOfType<dist::ShardingAttr>(i, dist::kShardingAttr);
      if (user) {
        noteBatch(i, user);
        // The user's choice stands; ZeRO adds dp to optimizer state.
        if (zero >= 1 && func.getArgAttr(i, attr::kState))
          edits.setArgAttr(i, dist::kShardingAttr, addDp(b, mesh, type, user));
        if (func.getArgAttr(i, attr::kParam)) paramSharding[arg] = user;
        continue;
      }
      dist::ShardingAttr s = dist::ShardingAttr::replicated(b.getContext(), type.getRank());
      if (auto data = func.getArgAttrOfType<StringAttr>(i, attr::kData)) {
        int64_t dim = 0;
        if (auto bd = func.getArgAttrOfType<IntegerAttr>(i, attr::kBatchDim)) dim = bd.getInt();
        if (type.getRank() == 0) continue;
        const int64_t replicas = dp * std::max<int64_t>(1, replicate);
        if (type.getDimSize(dim) % replicas != 0)
          return func.emitError("the batch of ")
                 << type.getDimSize(dim) << " samples (input '" << data.getValue()
                 << "') does not divide over " << replicas << " data-parallel devices";
        s = splitDim(b, type.getRank(), dim);
        noteBatch(i, s);
      } else if (auto state = func.getArgAttrOfType<StringAttr>(i, attr::kState)) {
        // With other axes, the state of a parameter nobody annotated stays to propagation:
        // splitting it over dp here would pull its parameter's layout (and its readers, e.g.
        // an embedding's ids) onto dp. ZeRO-1 covers the annotated parameters there; ZeRO-2
        // and 3 replicate the others over the other axes, as Megatron keeps its layer norms.
        if (!onlyDp && zero < 2) continue;
        StringRef owner = state.getValue().rsplit('.').first;
        if (auto it = annotatedParams.find(owner);
            it != annotatedParams.end() && it->second.getDims().size() == s.getDims().size())
          s = it->second;
        if (zero >= 1) s = addDp(b, mesh, type, s);
        byName[state.getValue()] = s;
      } else if (auto param = func.getArgAttrOfType<StringAttr>(i, attr::kParam)) {
        if (!onlyDp && zero < 2) continue;
        byName[param.getValue()] = s;
        paramSharding[arg] = s;
      }
      edits.setArgAttr(i, dist::kShardingAttr, s);
    }
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      if (func.getResultAttr(i, dist::kShardingAttr)) continue;
      auto type = cast<RankedTensorType>(func.getResultTypes()[i]);
      StringAttr name = func.getResultAttrOfType<StringAttr>(i, attr::kUpdates);
      if (!name) name = func.getResultAttrOfType<StringAttr>(i, attr::kGradOf);
      if (name && byName.count(name.getValue()))
        edits.setResultAttr(i, dist::kShardingAttr, byName[name.getValue()]);
      else if (type.getRank() == 0)  // losses and metrics: every device gets the value
        edits.setResultAttr(i, dist::kShardingAttr,
                            dist::ShardingAttr::replicated(b.getContext(), 0));
      else if (func.getResultAttr(i, attr::kOutput) && batchAxes && !batchAxes.empty() &&
               type.getDimSize(0) % mesh.groupSize(batchAxes) == 0) {
        // Per-sample outputs (logits) come out as the inputs go in: each rank its own samples,
        // whole otherwise (dtrun scores them against its slice of the targets).
        SmallVector<Attribute> dims(type.getRank(), b.getArrayAttr({}));
        dims[0] = batchAxes;
        edits.setResultAttr(
            i, dist::kShardingAttr,
            dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), b.getArrayAttr({})));
      }
    }
    edits.apply();
    if (zero >= 2) shardUpdates(func, b, mesh, paramSharding);
    return success();
  }

  // ZeRO-2/3: every update works on its dp-shard of the parameter (with or without optimizer
  // state to pull it there), so its gradient is reduce-scattered, never all-reduced.
  void shardUpdates(func::FuncOp func, Builder& b, dist::MeshAttr mesh,
                    const DenseMap<Value, dist::ShardingAttr>& paramSharding) {
    func.walk([&](Operation* op) {
      if (!isa<graph::SgdUpdateOp, graph::AdamwUpdateOp>(op)) return;
      auto it = paramSharding.find(op->getOperand(0));
      if (it == paramSharding.end()) return;
      auto type = cast<RankedTensorType>(op->getOperand(0).getType());
      dist::ShardingAttr shard = addDp(b, mesh, type, it->second);
      if (shard == it->second) return;  // no dimension divides: the update stays whole
      op->setAttr(dist::kShardingsAttr,
                  b.getArrayAttr(SmallVector<Attribute>(op->getNumResults(), shard)));
    });
  }
};

}  // namespace
}  // namespace dtc
