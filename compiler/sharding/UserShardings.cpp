// dtc-user-shardings: the mesh and the user's PATTERN=SPEC annotations (see Passes.td).
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/GlobPattern.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "FunctionAttrs.h"
#include "MegatronPreset.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "dist/IR/LayoutText.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_USERSHARDINGS
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct Spec {
  std::string text;  // as the user wrote it, for errors
  llvm::GlobPattern pattern;
  SmallVector<SmallVector<std::string>> dims;  // axes per dimension
  SmallVector<int64_t> blocks;                 // chunks per dimension ("3xtp": 3)
  bool used = false;
};

FailureOr<dist::MeshAttr> parseMesh(ModuleOp module, StringRef text) {
  llvm::Expected<std::vector<dist::MeshAxisText>> axes = dist::parseMeshText(text);
  if (!axes) return module.emitError(llvm::toString(axes.takeError()));
  Builder b(module.getContext());
  SmallVector<Attribute> names;
  SmallVector<int64_t> sizes;
  for (const dist::MeshAxisText& a : *axes) {
    names.push_back(b.getStringAttr(a.name));
    sizes.push_back(a.size);
  }
  return dist::MeshAttr::get(module.getContext(), b.getArrayAttr(names),
                             b.getDenseI64ArrayAttr(sizes));
}

struct UserShardingsPass : public impl::UserShardingsBase<UserShardingsPass> {
  using UserShardingsBase::UserShardingsBase;

  void runOnOperation() override {
    if (failed(run(getOperation()))) signalPassFailure();
  }

  LogicalResult run(ModuleOp module) {
    auto mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    if (!StringRef(this->mesh).empty()) {
      FailureOr<dist::MeshAttr> parsed = parseMesh(module, this->mesh);
      if (failed(parsed)) return failure();
      if (mesh && mesh != *parsed) return module.emitError("the module already has another mesh");
      mesh = *parsed;
      module->setAttr(dist::kMeshAttr, mesh);
    }
    SmallVector<Spec> specs;
    SmallVector<StringRef> items;
    StringRef(this->shard).split(items, ';', -1, /*KeepEmpty=*/false);
    std::string preset;
    if (!StringRef(megatron).empty()) {
      if (failed(checkHeads(module, mesh, megatron))) return failure();
      std::string chosen;
      const std::vector<std::string> specs =
          megatronSpecs(module, megatron, mesh.axisSize(megatron), &chosen);
      if (specs.empty())
        return module.emitError(
            "Megatron's tensor-parallel splits need a transformer: no parameter is named like "
            "GPT-2's (*.attn.c_attn.weight) and no block has GPT-2's or Llama's shape (split the "
            "model with --shard PATTERN=SPEC)");
      // Said once per compile (dtc compile prints remarks): which blocks the preset took.
      module.emitRemark() << "tensor parallel over " << megatron << " (" << mesh.axisSize(megatron)
                          << " devices): Megatron's splits " << chosen;
      for (const std::string& item : specs) preset += (preset.empty() ? "" : ";") + item;
      SmallVector<StringRef> more;
      StringRef(preset).split(more, ';');
      items.append(more.begin(), more.end());
    }
    for (StringRef item : items) {
      if (!mesh) return module.emitError("--shard needs a mesh (--mesh)");
      llvm::Expected<dist::ShardSpecText> parsed = dist::parseShardSpec(item);
      if (!parsed) return module.emitError(llvm::toString(parsed.takeError()));
      Spec spec{item.trim().str(), {}, {}, {}, false};
      // A GlobPattern refers to the text it was made from: the item's, which outlives the specs.
      auto glob = llvm::GlobPattern::create(item.trim().split('=').first);
      if (!glob) return module.emitError("--shard wants PATTERN=SPEC, got '") << item << "'";
      spec.pattern = std::move(*glob);
      for (const dist::ShardDimText& d : parsed->dims) {
        spec.blocks.push_back(d.chunks);
        spec.dims.emplace_back();
        for (const std::string& a : d.axes) {
          if (mesh.axisIndex(a) < 0)
            return module.emitError("--shard '")
                   << spec.text << "': the mesh has no axis '" << a << "'";
          spec.dims.back().push_back(a);
        }
      }
      specs.push_back(std::move(spec));
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (failed(annotate(func, mesh, specs))) return failure();
      if (!StringRef(sequenceParallel).empty() &&
          failed(splitSequence(func, mesh, sequenceParallel)))
        return failure();
      // Without data parallelism nothing splits the inputs, and dtrun reads them whole but for
      // their samples: keep propagation from splitting them.
      if (mesh && mesh.axisIndex("dp") < 0) {
        FunctionAttrEdits edits(func);
        for (BlockArgument arg : func.getArguments())
          if (func.getArgAttr(arg.getArgNumber(), attr::kData) &&
              !func.getArgAttr(arg.getArgNumber(), dist::kShardingAttr))
            edits.setArgAttr(
                arg.getArgNumber(), dist::kShardingAttr,
                dist::ShardingAttr::replicated(func.getContext(),
                                               cast<RankedTensorType>(arg.getType()).getRank()));
        // Outputs (losses, logits) whole on every device, for dtrun to read.
        for (unsigned i = 0; i < func.getNumResults(); ++i)
          if (func.getResultAttr(i, attr::kOutput) && !func.getResultAttr(i, dist::kShardingAttr))
            edits.setResultAttr(
                i, dist::kShardingAttr,
                dist::ShardingAttr::replicated(
                    func.getContext(), cast<RankedTensorType>(func.getResultTypes()[i]).getRank()));
        edits.apply();
      }
    }
    for (const Spec& spec : specs)
      if (!spec.used) {
        if (StringRef(preset).contains(spec.text))
          return module.emitError(
                     "Megatron's tensor-parallel splits need GPT-2's weights: no "
                     "parameter matches '")
                 << spec.text << "' (split other models with --shard PATTERN=SPEC)";
        return module.emitError("--shard '") << spec.text << "': no parameter or input matches";
      }
    return success();
  }

  static bool usesAxis(dist::ShardingAttr s, StringRef axis) {
    for (Attribute dim : s.getDims())
      for (Attribute a : cast<ArrayAttr>(dim))
        if (cast<StringAttr>(a).getValue() == axis) return true;
    return false;
  }

  // Megatron's sequence parallelism: every norm over the features of [B, T, C] (the ops that
  // normalise features: LayerNorm, RMSNorm) reads its input split along T (a user-priority
  // constraint the residual stream inherits).
  static LogicalResult splitSequence(func::FuncOp func, dist::MeshAttr mesh, StringRef axis) {
    if (!mesh || mesh.axisIndex(axis) < 0)
      return func.emitError("sequence parallelism needs a mesh axis '") << axis << "'";
    int64_t n = mesh.axisSize(axis);
    SmallVector<OpOperand*> norms;  // each norm's input x
    func.walk([&](Operation* op) {
      if (graph::normalizesFeatures(op)) norms.push_back(&op->getOpOperand(0));
    });
    Builder b(func.getContext());
    // The batch keeps its data-parallel split: a layout pinned without it would gather every
    // sequence-parallel region over the data-parallel replicas.
    auto batchAxes = [&](RankedTensorType type) {
      SmallVector<Attribute> axes;
      int64_t replicas = 1;
      for (StringRef name : {"dp_replicate", "dp"})
        if (mesh.axisIndex(name) >= 0) {
          axes.push_back(b.getStringAttr(name));
          replicas *= mesh.axisSize(name);
        }
      if (type.getDimSize(0) % replicas != 0) axes.clear();
      return b.getArrayAttr(axes);
    };
    // Context parallelism splits every sequence over cp already: sequence parallelism's regions
    // split each rank's block further (cp major, as the data is split), and the regions between
    // keep the cp split (a layout pinned without it would gather the sequence over cp there).
    const bool context = mesh.axisIndex("cp") >= 0;
    const int64_t contextDevices = context ? mesh.axisSize("cp") : 1;
    auto sequenceAxes = [&](bool withAxis) {
      SmallVector<Attribute> axes;
      if (context) axes.push_back(b.getStringAttr("cp"));
      if (withAxis) axes.push_back(b.getStringAttr(axis));
      return b.getArrayAttr(axes);
    };
    for (OpOperand* x : norms) {
      Operation* op = x->getOwner();
      auto type = cast<RankedTensorType>(x->get().getType());
      if (type.getRank() != 3) continue;
      if (type.getDimSize(1) % (n * contextDevices) != 0)
        return op->emitError("the sequence of ")
               << type.getDimSize(1) << " positions does not divide over " << n * contextDevices
               << " devices (" << (context ? "cp and " : "") << axis << ")";
      SmallVector<Attribute> dims{batchAxes(type), sequenceAxes(true), b.getArrayAttr({})};
      auto sharding =
          dist::ShardingAttr::get(func.getContext(), b.getArrayAttr(dims), b.getArrayAttr({}));
      OpBuilder builder(op);
      Value split = dist::ReshardOp::create(builder, op->getLoc(), x->get(), sharding);
      x->set(split);
    }
    // The regions between: a column-parallel linear (weight split by rows) gives whole
    // sequences split by features; a row-parallel one (weight split by columns) hands its sum
    // back split by sequence, which is where the reduce-scatter goes.
    SmallVector<graph::LinearOp> linears;
    func.walk([&](graph::LinearOp op) { linears.push_back(op); });
    for (graph::LinearOp op : linears) {
      auto type = cast<RankedTensorType>(op.getY().getType());
      // Mixed precision reads the weight through a cast to the 16-bit type.
      Value w = op.getWeight();
      auto weightCast = w.getDefiningOp<graph::CastOp>();
      if (weightCast) w = weightCast.getX();
      auto weight = dyn_cast<BlockArgument>(w);
      if (type.getRank() != 3 || !weight) continue;
      auto ws =
          func.getArgAttrOfType<dist::ShardingAttr>(weight.getArgNumber(), dist::kShardingAttr);
      if (!ws || !usesAxis(ws, axis)) {
        // A whole weight that widens (the LM head without vocabulary parallelism) reads whole
        // sequences, as Megatron gathers before its head: gathered after it, its wide output
        // would cost more memory and bytes than the whole layout does.
        auto in = cast<RankedTensorType>(op.getX().getType());
        if (type.getDimSize(2) > in.getDimSize(2)) {
          SmallVector<Attribute> whole{batchAxes(in), sequenceAxes(false), b.getArrayAttr({})};
          OpBuilder builder(op);
          Value gathered = dist::ReshardOp::create(
              builder, op.getLoc(), op.getX(),
              dist::ShardingAttr::get(func.getContext(), b.getArrayAttr(whole),
                                      b.getArrayAttr({})));
          op.getXMutable().assign(gathered);
        }
        continue;
      }
      // The cast keeps the weight's split: left to propagation, the backward's input gradient
      // would gather the weight rather than the sequence-split gradient.
      // So does every cast of it: recomputation reads the weight through a copy of the cast.
      if (weightCast)
        for (Operation* user : weight.getUsers())
          if (isa<graph::CastOp>(user) && !user->hasAttr(dist::kShardingsAttr))
            user->setAttr(dist::kShardingsAttr, b.getArrayAttr({ws}));
      auto isAxis = [&](int64_t d) {
        return ws.dimAxes(d).size() == 1 && cast<StringAttr>(ws.dimAxes(d)[0]).getValue() == axis;
      };
      SmallVector<Attribute> dims(3, b.getArrayAttr({}));
      dims[0] = batchAxes(type);
      dims[1] = sequenceAxes(false);
      SmallVector<int64_t> blocks(3, 1);
      if (isAxis(0)) {
        dims[2] = b.getArrayAttr({b.getStringAttr(axis)});
        blocks[2] = ws.dimBlocks(0);
      } else if (isAxis(1)) {
        dims[1] = sequenceAxes(true);
        // Its input: whole sequences split by features (what the weight gradient reads too).
        SmallVector<Attribute> in(3, b.getArrayAttr({}));
        in[0] = batchAxes(cast<RankedTensorType>(op.getX().getType()));
        in[1] = sequenceAxes(false);
        in[2] = b.getArrayAttr({b.getStringAttr(axis)});
        // Annotated on the value itself, so the backward pass (which reads the same value for
        // the weight gradient) sees it too.
        Operation* producer = op.getX().getDefiningOp();
        if (producer && producer->getNumResults() == 1 && !producer->hasAttr(dist::kShardingsAttr))
          producer->setAttr(dist::kShardingsAttr,
                            b.getArrayAttr({dist::ShardingAttr::get(
                                func.getContext(), b.getArrayAttr(in), b.getArrayAttr({}))}));
      } else {
        continue;
      }
      OpBuilder builder(op);
      builder.setInsertionPointAfter(op);
      auto sharding = dist::ShardingAttr::get(func.getContext(), b.getArrayAttr(dims),
                                              b.getArrayAttr({}), ArrayRef<int64_t>(blocks));
      auto pinned = dist::ReshardOp::create(builder, op.getLoc(), op.getY(), sharding);
      op.getY().replaceAllUsesExcept(pinned, pinned);
    }
    return success();
  }

  // Attention heads [B, H, T, T] must divide over the tensor-parallel axis.
  static LogicalResult checkHeads(ModuleOp module, dist::MeshAttr mesh, StringRef axis) {
    if (!mesh || mesh.axisIndex(axis) < 0)
      return module.emitError("Megatron's splits need a mesh axis '") << axis << "'";
    int64_t tp = mesh.axisSize(axis);
    WalkResult result = module.walk([&](graph::CausalSoftmaxOp op) {
      auto shape = cast<RankedTensorType>(op.getX().getType()).getShape();
      if (shape.size() == 4 && shape[1] % tp != 0) {
        op.emitError("attention has ") << shape[1] << " heads, which do not divide over " << tp
                                       << " tensor-parallel devices (" << axis << "=" << tp << ")";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  LogicalResult annotate(func::FuncOp func, dist::MeshAttr mesh, MutableArrayRef<Spec> specs) {
    Builder b(func.getContext());
    llvm::StringMap<dist::ShardingAttr> byParam;
    auto shardingFor = [&](StringRef name, RankedTensorType type,
                           dist::ShardingAttr& out) -> LogicalResult {
      const Spec* chosen = nullptr;
      for (Spec& spec : specs) {
        if (!spec.pattern.match(name)) continue;
        spec.used = true;
        if (spec.dims.size() != static_cast<size_t>(type.getRank()))
          return func.emitError("--shard '")
                 << spec.text << "': tensor '" << name << "' has " << type.getRank()
                 << " dimensions, the spec " << spec.dims.size();
        if (chosen && (chosen->dims != spec.dims || chosen->blocks != spec.blocks))
          return func.emitError("tensor '") << name << "' matches --shard '" << chosen->text
                                            << "' and '" << spec.text << "', which disagree";
        chosen = &spec;
      }
      if (!chosen) return success();
      SmallVector<Attribute> dims;
      for (const auto& axes : chosen->dims) {
        SmallVector<Attribute> names;
        for (const std::string& a : axes) names.push_back(b.getStringAttr(a));
        dims.push_back(b.getArrayAttr(names));
      }
      bool trivial = llvm::all_of(chosen->blocks, [](int64_t v) { return v == 1; });
      auto sharding = dist::ShardingAttr::getChecked(
          [&] { return func.emitError("--shard '") << chosen->text << "': "; }, func.getContext(),
          b.getArrayAttr(dims), b.getArrayAttr({}),
          b.getDenseI64ArrayAttr(trivial ? ArrayRef<int64_t>() : ArrayRef<int64_t>(chosen->blocks)),
          b.getArrayAttr({}));
      if (!sharding) return failure();
      if (auto error = sharding.check(mesh, type.getShape()))
        return func.emitError("--shard '") << chosen->text << "': cannot split tensor '" << name
                                           << "' " << type << ": " << *error;
      out = sharding;
      return success();
    };
    FunctionAttrEdits edits(func);
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      StringAttr name = func.getArgAttrOfType<StringAttr>(i, attr::kParam);
      if (!name) name = func.getArgAttrOfType<StringAttr>(i, attr::kData);
      if (!name) continue;
      dist::ShardingAttr sharding;
      if (failed(shardingFor(name.getValue(), cast<RankedTensorType>(arg.getType()), sharding)))
        return failure();
      if (!sharding) continue;
      edits.setArgAttr(i, dist::kShardingAttr, sharding);
      if (func.getArgAttr(i, attr::kParam)) byParam[name.getValue()] = sharding;
    }
    edits.apply();
    // Optimizer state is laid out as its parameter ("<param>.<slot>", same shape).
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto state = func.getArgAttrOfType<StringAttr>(i, attr::kState);
      if (!state || func.getArgAttr(i, dist::kShardingAttr)) continue;
      auto [param, slot] = state.getValue().rsplit('.');
      auto it = byParam.find(param);
      if (it != byParam.end() &&
          it->second.getDims().size() ==
              static_cast<size_t>(cast<RankedTensorType>(arg.getType()).getRank()))
        edits.setArgAttr(i, dist::kShardingAttr, it->second);
    }
    edits.apply();
    return success();
  }
};

}  // namespace
}  // namespace dtc
