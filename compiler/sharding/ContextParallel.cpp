// dtc-context-parallel: sequences split over a `cp` mesh axis (see Passes.td).
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
#include "sharding/SequenceDims.h"

namespace dtc {
#define GEN_PASS_DEF_CONTEXTPARALLEL
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

constexpr const char kAxis[] = "cp";

struct ContextParallelPass : public impl::ContextParallelBase<ContextParallelPass> {
  using ContextParallelBase::ContextParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    if (!mesh || mesh.axisIndex(kAxis) < 0 || mesh.axisSize(kAxis) != cp) {
      module.emitError("context parallelism needs a mesh axis cp of ")
          << static_cast<int64_t>(cp) << " devices (--mesh cp=N)";
      return signalPassFailure();
    }
    if (attention != "all-gather" && attention != "ring" && attention != "ulysses") {
      module.emitError("context parallelism's attention is all-gather, ring or ulysses, not '")
          << attention << "'";
      return signalPassFailure();
    }
    if (failed(findContext(module))) return signalPassFailure();
    chunks_ = balance ? 2 * cp : cp;
    if (context_ % chunks_ != 0) {
      if (balance)
        module.emitError("the context length ")
            << context_ << " does not split into 2·cp = " << chunks_
            << " equal chunks (load-balanced context parallelism; --no-cp-load-balance needs "
               "it to divide over cp only)";
      else
        module.emitError("the context length ")
            << context_ << " does not divide over cp=" << static_cast<int64_t>(cp);
      return signalPassFailure();
    }
    Builder b(module);
    for (const char* axis : {"dp_replicate", "dp"})
      if (mesh.axisIndex(axis) >= 0) dataAxes_.push_back(b.getStringAttr(axis));
    findPositionTables(module);
    for (auto func : module.getOps<func::FuncOp>()) {
      unmergeLossRows(func);
      if (failed(splitSequences(func, mesh))) return signalPassFailure();
      if (balance)
        func.walk([&](Operation* op) {
          if (isa<graph::CausalAttentionOp, graph::CausalAttentionGradOp>(op))
            op->setAttr("seq_chunks", b.getI64IntegerAttr(chunks_));
        });
    }
    module.emitRemark() << "context parallel over cp (" << static_cast<int64_t>(cp)
                        << " devices): sequences of " << context_ << " tokens, " << context_ / cp
                        << " on each device" << (balance ? " in 2 chunks (load-balanced)" : "")
                        << "; attention by " << attention;
  }

  // The context length: the sequence of the training step's causal attention, which every
  // attention op must share. Unfused attention keeps [T, T] scores and cannot split its queries.
  LogicalResult findContext(ModuleOp module) {
    LogicalResult result = success();
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.getSymName() != fn::kTrainStep) continue;
      func.walk([&](Operation* op) {
        if (failed(result)) return;
        if (isa<graph::CausalSoftmaxOp>(op)) {
          result = op->emitError(
              "context parallelism needs attention fused (causal_attention), not a causal "
              "softmax over [T, T] scores");
          return;
        }
        auto attention = dyn_cast<graph::CausalAttentionOp>(op);
        if (!attention) return;
        auto q = cast<RankedTensorType>(attention.getQ().getType());
        const int64_t t = q.getDimSize(q.getRank() - 2);
        if (context_ && t != context_) {
          result = op->emitError("attention over ")
                   << t << " positions next to attention over " << context_
                   << "; context parallelism splits one sequence length";
          return;
        }
        context_ = t;
      });
    }
    if (failed(result)) return failure();
    if (!context_)
      return module.emitError("mesh axis cp splits nothing: the model has no causal attention");
    return success();
  }

  // Parameters indexed by position (a learned position table added to the tokens, rotary
  // tables): split over cp with the sequence, so each device holds the rows of its positions and
  // nothing reads a table whole against split activations. Load-balanced, the table is read in
  // the sequence's order (dtc-sequence-order's split and concat) from a whole parameter: the
  // reordered table is pinned split, or propagation may keep it whole and, in backward, pull
  // what it meets (rotary's gradient of the keys) onto the whole sequence.
  void findPositionTables(ModuleOp module) {
    for (auto func : module.getOps<func::FuncOp>()) {
      for (const sharding::SequenceFlow::PositionTable& t :
           sharding::traceSequence(func, sharding::sequenceInputs(func, context_)).tables) {
        auto type = cast<RankedTensorType>(t.value.getType());
        if (type.getDimSize(t.dim) != context_) continue;
        auto arg = dyn_cast<BlockArgument>(t.value);
        if (!arg) {
          pinSplit(t.value, t.dim);
          continue;
        }
        if (func.getSymName() != fn::kTrainStep) continue;
        if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
          positionTables_[name.getValue()] = t.dim;
      }
    }
  }

  void pinSplit(Value table, int64_t dim) {
    Operation* def = table.getDefiningOp();
    if (!def || (table.hasOneUse() && isa<dist::ReshardOp>(*table.getUsers().begin()))) return;
    auto type = cast<RankedTensorType>(table.getType());
    Builder b(def->getContext());
    SmallVector<Attribute> dims(type.getRank(), b.getArrayAttr({}));
    dims[dim] = b.getArrayAttr({b.getStringAttr(kAxis)});
    OpBuilder builder(def);
    builder.setInsertionPointAfter(def);
    auto pinned = dist::ReshardOp::create(
        builder, def->getLoc(), table,
        dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), b.getArrayAttr({})));
    table.replaceAllUsesExcept(pinned, pinned);
  }

  // Data inputs of [B, T, ...] split their batch over the data axes and their sequence over cp;
  // other data inputs their batch only. Per-sample outputs (logits) stay split as their inputs.
  LogicalResult splitSequences(func::FuncOp func, dist::MeshAttr mesh) {
    Builder b(func.getContext());
    FunctionAttrEdits edits(func);
    const int64_t replicas = mesh.groupSize(b.getArrayAttr(dataAxes_));
    auto layout = [&](int64_t rank, int64_t batchDim, bool sequence) {
      SmallVector<Attribute> dims(rank, b.getArrayAttr({}));
      dims[batchDim] = b.getArrayAttr(dataAxes_);
      if (sequence) dims[batchDim + 1] = b.getArrayAttr({b.getStringAttr(kAxis)});
      return dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), b.getArrayAttr({}));
    };
    auto isSequence = [&](RankedTensorType type, int64_t batchDim) {
      return type.getRank() > batchDim + 1 && type.getDimSize(batchDim + 1) == context_;
    };
    // Parameters are replicated over cp as over dp (each device's positions need all of them);
    // dtc-data-parallel says so where there is a dp axis, and here on a mesh of cp (and a
    // pipeline) alone, where propagation would otherwise split position tables by the sequence.
    bool dataLikeOnly = mesh.axisIndex("dp") < 0;
    for (Attribute name : mesh.getNames())
      dataLikeOnly &= llvm::is_contained({StringRef(kAxis), StringRef("pp")},
                                         cast<StringAttr>(name).getValue());
    for (BlockArgument arg : func.getArguments()) {
      const unsigned i = arg.getArgNumber();
      auto data = func.getArgAttrOfType<StringAttr>(i, attr::kData);
      auto type = cast<RankedTensorType>(arg.getType());
      auto param = func.getArgAttrOfType<StringAttr>(i, attr::kParam);
      if (param && positionTables_.count(param.getValue()) &&
          !func.getArgAttr(i, dist::kShardingAttr)) {
        SmallVector<Attribute> dims(type.getRank(), b.getArrayAttr({}));
        dims[positionTables_.lookup(param.getValue())] = b.getArrayAttr({b.getStringAttr(kAxis)});
        edits.setArgAttr(
            i, dist::kShardingAttr,
            dist::ShardingAttr::get(b.getContext(), b.getArrayAttr(dims), b.getArrayAttr({})));
      } else if (!data && dataLikeOnly && !func.getArgAttr(i, dist::kShardingAttr) &&
                 (param || func.getArgAttr(i, attr::kState))) {
        edits.setArgAttr(i, dist::kShardingAttr,
                         dist::ShardingAttr::replicated(b.getContext(), type.getRank()));
      }
      if (!data || type.getRank() == 0) continue;
      int64_t dim = 0;
      if (auto bd = func.getArgAttrOfType<IntegerAttr>(i, attr::kBatchDim)) dim = bd.getInt();
      if (type.getDimSize(dim) % replicas != 0)
        return func.emitError("the batch of ")
               << type.getDimSize(dim) << " samples (input '" << data.getValue()
               << "') does not divide over " << replicas << " data-parallel devices";
      const bool sequence = isSequence(type, dim);
      edits.setArgAttr(i, dist::kShardingAttr, layout(type.getRank(), dim, sequence));
      if (sequence && balance)
        edits.setArgAttr(i, dist::kSequenceChunksAttr, b.getI64IntegerAttr(chunks_));
    }
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto type = cast<RankedTensorType>(func.getResultTypes()[i]);
      // Whole on every device by default (user-shardings): split as the inputs instead, so
      // that no rank gathers [B, T, V] logits.
      if (!func.getResultAttr(i, attr::kOutput) || type.getRank() == 0 ||
          type.getDimSize(0) % replicas != 0)
        continue;
      edits.setResultAttr(i, dist::kShardingAttr, layout(type.getRank(), 0, isSequence(type, 0)));
    }
    edits.apply();
    return success();
  }

  // Cross-entropy over logits reshaped [B, T, V] -> [B·T, V] (and labels [B, T] -> [B·T]) takes
  // them unmerged: with T split over cp (and B over dp), the merged rows are no block of the
  // whole and propagation would gather the logits; the loss does not care how its rows are laid.
  // Whole (softmax_cross_entropy) or cut over a split vocabulary (cross_entropy_*), every op of
  // the loss reads the unmerged values and its per-row results take the rows' shape [B, T].
  void unmergeLossRows(func::FuncOp func) {
    // `v`'s value before a reshape that merges its leading dimensions into rows, or null.
    auto unmerged = [](Value v, int64_t keepLast) -> Value {
      auto reshape = v.getDefiningOp<graph::ReshapeOp>();
      if (!reshape) return nullptr;
      auto from = cast<RankedTensorType>(reshape.getX().getType());
      auto to = cast<RankedTensorType>(v.getType());
      if (from.getRank() < 2 + keepLast || to.getRank() != 1 + keepLast) return nullptr;
      if (keepLast && from.getShape().back() != to.getShape().back()) return nullptr;
      return reshape.getX();
    };
    auto isLoss = [](Operation* op) {
      return isa<graph::SoftmaxCrossEntropyOp, graph::SoftmaxCrossEntropyGradOp,
                 graph::CrossEntropyRowMaxOp, graph::CrossEntropyPartsOp,
                 graph::CrossEntropyCombineOp, graph::CrossEntropyPartsGradOp>(op);
    };
    // The merged values (logits, labels) the loss reads, and what each was merged from.
    DenseMap<Value, Value> from;
    SmallVector<Operation*> losses;
    func.walk([&](Operation* op) {
      if (!isLoss(op)) return;
      losses.push_back(op);
      Value logits, labels;
      if (auto ce = dyn_cast<graph::SoftmaxCrossEntropyOp>(op))
        logits = ce.getLogits(), labels = ce.getLabels();
      else if (auto grad = dyn_cast<graph::SoftmaxCrossEntropyGradOp>(op))
        logits = grad.getLogits(), labels = grad.getLabels();
      else if (auto parts = dyn_cast<graph::CrossEntropyPartsOp>(op))
        logits = parts.getLogits(), labels = parts.getLabels();
      else if (auto grad = dyn_cast<graph::CrossEntropyPartsGradOp>(op))
        logits = grad.getLogits(), labels = grad.getLabels();
      if (!logits) return;
      Value x = unmerged(logits, 1), y = unmerged(labels, 0);
      if (!x || !y ||
          cast<RankedTensorType>(y.getType()).getShape() !=
              cast<RankedTensorType>(x.getType()).getShape().drop_back())
        return;
      from[logits] = x;
      from[labels] = y;
    });
    if (from.empty()) return;
    // Every loss op reads the unmerged values, in program order, so that each per-row value is
    // retyped before the ops that read it infer theirs.
    for (Operation* op : losses) {
      bool changed = false;
      for (OpOperand& operand : op->getOpOperands())
        if (Value x = from.lookup(operand.get())) operand.set(x), changed = true;
      for (Value v : op->getOperands()) changed |= v.getDefiningOp() && isLoss(v.getDefiningOp());
      if (!changed) continue;
      SmallVector<Type> types;
      auto infer = cast<InferTypeOpInterface>(op);
      if (failed(infer.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                        op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                        op->getRegions(), types)))
        continue;
      for (auto [result, type] : llvm::zip(op->getResults(), types)) {
        Type merged = result.getType();
        if (merged == type) continue;
        result.setType(type);
        keepMergedReaders(op, result, merged, isLoss);
      }
    }
    for (auto [merged, x] : from)
      if (merged.use_empty()) merged.getDefiningOp()->erase();
  }

  // A loss result now unmerged (dlogits [B, T, V]): readers that reshaped it back take it as it
  // is, other readers outside the loss read it merged again.
  template <typename IsLoss>
  static void keepMergedReaders(Operation* op, Value result, Type merged, IsLoss isLoss) {
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Value flat;
    for (OpOperand& use : llvm::make_early_inc_range(result.getUses())) {
      if (isLoss(use.getOwner())) continue;
      auto back = dyn_cast<graph::ReshapeOp>(use.getOwner());
      if (back && back.getResult().getType() == result.getType()) {
        back.getResult().replaceAllUsesWith(result);
        back->erase();
        continue;
      }
      if (!flat) flat = graph::ReshapeOp::create(b, op->getLoc(), merged, result).getResult();
      use.set(flat);
    }
  }

  int64_t context_ = 0, chunks_ = 1;
  llvm::StringMap<int64_t> positionTables_;  // parameter name -> its position dimension
  SmallVector<Attribute> dataAxes_;
};

}  // namespace
}  // namespace dtc
