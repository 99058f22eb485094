// dtc-vocab-parallel: vocabulary-split embeddings and cross-entropy (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_VOCABPARALLEL
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct VocabParallelPass : public impl::VocabParallelBase<VocabParallelPass> {
  using VocabParallelBase::VocabParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    if (!mesh || mesh.axisIndex(axis) < 0) {
      module.emitError("vocabulary parallelism needs a mesh axis '") << axis << "'";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(splitTables(func, mesh)) || failed(cutLosses(func))) return signalPassFailure();
  }

  // The parameter an untied LM head multiplies by: logits = linear(x, W), W [V, C], read by the
  // cross-entropy through reshapes of its rows and mixed precision's casts; null if not that.
  static BlockArgument headWeight(Value logits) {
    for (Operation* def = logits.getDefiningOp(); def; def = def->getOperand(0).getDefiningOp()) {
      if (auto linear = dyn_cast<graph::LinearOp>(def)) {
        Value w = linear.getWeight();
        while (auto cast = w.getDefiningOp<graph::CastOp>()) w = cast.getX();
        return dyn_cast<BlockArgument>(w);
      }
      if (!isa<graph::ReshapeOp, graph::CastOp>(def)) return nullptr;
    }
    return nullptr;
  }

  // Every parameter an embedding reads is split by rows (vocabulary) over the axis, and so is an
  // untied LM head's weight (a tied one follows its table by propagation).
  LogicalResult splitTables(func::FuncOp func, dist::MeshAttr mesh) {
    Builder b(func.getContext());
    SmallVector<std::pair<Operation*, Value>> tables;
    func.walk([&](Operation* op) {
      if (auto embedding = dyn_cast<graph::EmbeddingOp>(op))
        tables.push_back({op, embedding.getTable()});
      else if (auto ce = dyn_cast<graph::SoftmaxCrossEntropyOp>(op))
        if (BlockArgument w = headWeight(ce.getLogits())) tables.push_back({op, w});
    });
    for (auto [op, value] : tables) {
      auto table = dyn_cast<BlockArgument>(value);
      if (!table || table.getOwner()->getParentOp() != func ||
          !func.getArgAttr(table.getArgNumber(), attr::kParam))
        continue;
      unsigned i = table.getArgNumber();
      if (func.getArgAttr(i, dist::kShardingAttr)) continue;  // the user's or the preset's choice
      auto type = cast<RankedTensorType>(table.getType());
      if (type.getRank() != 2) continue;
      int64_t n = mesh.axisSize(axis);
      if (type.getDimSize(0) % n != 0) {
        auto name = func.getArgAttrOfType<StringAttr>(i, attr::kParam);
        op->emitError("the vocabulary of ")
            << type.getDimSize(0) << " rows (tensor '" << (name ? name.getValue() : "?")
            << "') does not divide over " << n << " devices (" << axis
            << "): keep it whole with --no-vocab-parallel, or pad it to a multiple of " << n;
        return failure();
      }
      SmallVector<Attribute> dims{b.getArrayAttr({b.getStringAttr(axis)}), b.getArrayAttr({})};
      func.setArgAttr(
          i, dist::kShardingAttr,
          dist::ShardingAttr::get(func.getContext(), b.getArrayAttr(dims), b.getArrayAttr({})));
    }
    return success();
  }

  static IntegerAttr countOf(Operation* op) {
    return Builder(op->getContext()).getI64IntegerAttr(*graph::meanCount(op));
  }

  // Cross-entropy in pieces that never need a whole row of logits.
  LogicalResult cutLosses(func::FuncOp func) {
    DenseMap<std::pair<Value, Value>, std::pair<Value, Value>> stats;  // (logits, labels) -> (M, S)
    SmallVector<Operation*> ops;
    func.walk([&](Operation* op) {
      if (isa<graph::SoftmaxCrossEntropyOp, graph::SoftmaxCrossEntropyGradOp>(op))
        ops.push_back(op);
    });
    auto statsFor = [&](OpBuilder& b, Location loc, Value logits, Value labels,
                        IntegerAttr ignore) {
      auto key = std::make_pair(logits, labels);
      if (auto it = stats.find(key); it != stats.end()) return it->second;
      Value rowMax = graph::CrossEntropyRowMaxOp::create(b, loc, logits);
      auto parts =
          graph::CrossEntropyPartsOp::create(b, loc, logits, labels, rowMax, ArrayAttr(), ignore);
      stats[key] = {rowMax, parts.getSumExp()};
      targets[key] = parts.getTarget();
      return stats[key];
    };
    for (Operation* op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      // Rows labelled ignore_index (when there is one) add nothing: combine reads the labels.
      auto ignore = op->getAttrOfType<IntegerAttr>("ignore_index");
      if (auto ce = dyn_cast<graph::SoftmaxCrossEntropyOp>(op)) {
        auto [rowMax, sumExp] = statsFor(b, loc, ce.getLogits(), ce.getLabels(), ignore);
        Value target = targets[{ce.getLogits(), ce.getLabels()}];
        Value loss = graph::CrossEntropyCombineOp::create(
            b, loc, rowMax, sumExp, target, ignore ? ce.getLabels() : Value(), countOf(op), ignore);
        ce.getLoss().replaceAllUsesWith(loss);
      } else {
        auto grad = cast<graph::SoftmaxCrossEntropyGradOp>(op);
        // The forward pass's statistics when it ran on the same logits (it comes first).
        auto [rowMax, sumExp] = statsFor(b, loc, grad.getLogits(), grad.getLabels(), ignore);
        Value dlogits = graph::CrossEntropyPartsGradOp::create(
            b, loc, grad.getDloss(), grad.getLogits(), grad.getLabels(), rowMax, sumExp,
            countOf(op), ArrayAttr(), ignore);
        grad.getDlogits().replaceAllUsesWith(dlogits);
      }
      op->erase();
    }
    return success();
  }

  DenseMap<std::pair<Value, Value>, Value> targets;
};

}  // namespace
}  // namespace dtc
