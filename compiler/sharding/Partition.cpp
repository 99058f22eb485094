// dtc-partition: from global shapes with shardings to the program one device runs, with the
// collectives between. See Passes.td.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "Passes.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"
#include "sharding/ShardingUtils.h"

namespace dtc {
#define GEN_PASS_DEF_PARTITION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc::sharding {
namespace {

std::string text(Attribute a) {
  std::string s;
  llvm::raw_string_ostream os(s);
  a.print(os);
  return s;
}

class Partitioner {
 public:
  Partitioner(func::FuncOp func, dist::MeshAttr mesh)
      : func_(func), mesh_(mesh), plainMesh_(toMesh(mesh)), b_(func) {}

  LogicalResult run() {
    Block& body = func_.getBody().front();
    // Rules and loss counts read global shapes: take them all before any type changes.
    SmallVector<Operation*> ops;
    for (Operation& op : body.without_terminator()) {
      ops.push_back(&op);
      if (isa<dist::ReshardOp>(op)) continue;
      FailureOr<OpShardingRule> rule = getShardingRule(&op);
      if (failed(rule)) return failure();
      rules_[&op] = std::move(*rule);
      pinGlobalCount(&op);
      for (Value v : op.getResults()) global_[v] = cast<RankedTensorType>(v.getType());
    }
    for (BlockArgument arg : body.getArguments()) {
      auto s = func_.getArgAttrOfType<dist::ShardingAttr>(arg.getArgNumber(), dist::kShardingAttr);
      if (!s)
        return func_.emitError("partition: argument ")
               << arg.getArgNumber() << " has no sharding (run dtc-sharding-propagation)";
      auto type = cast<RankedTensorType>(arg.getType());
      if (auto error = s.check(mesh_, type.getShape()))
        return func_.emitError("cannot shard ") << describe(arg) << ": " << *error;
      global_[arg] = type;
      actual_[arg] = s;
      arg.setType(localType(type, s));
    }

    for (Operation* op : ops)
      if (failed(partition(op))) return failure();

    Operation* ret = body.getTerminator();
    for (unsigned i = 0; i < ret->getNumOperands(); ++i) {
      auto want = func_.getResultAttrOfType<dist::ShardingAttr>(i, dist::kShardingAttr);
      if (!want) return func_.emitError("partition: result ") << i << " has no sharding";
      FailureOr<Value> v = reshard(ret->getOperand(i), want, ret);
      if (failed(v)) return failure();
      ret->setOperand(i, *v);
    }
    func_.setType(
        FunctionType::get(func_.getContext(), body.getArgumentTypes(), ret->getOperandTypes()));
    return success();
  }

 private:
  RankedTensorType localType(RankedTensorType global, dist::ShardingAttr s) {
    return RankedTensorType::get(s.localShape(mesh_, global.getShape()), global.getElementType());
  }

  // A mean loss on a slice divides by the whole batch's count, so device losses are summands.
  void pinGlobalCount(Operation* op) {
    if (op->hasAttr("count")) return;
    if (std::optional<int64_t> count = graph::meanCount(op))
      op->setAttr("count", Builder(op->getContext()).getI64IntegerAttr(*count));
  }

  LogicalResult partition(Operation* op) {
    MLIRContext* ctx = op->getContext();
    if (auto reshardOp = dyn_cast<dist::ReshardOp>(op)) {
      FailureOr<Value> v = reshard(reshardOp.getX(), reshardOp.getSharding(), op);
      if (failed(v)) return failure();
      reshardOp.getResult().replaceAllUsesWith(*v);
      op->erase();
      return success();
    }
    FailureOr<FactorShardings> read = readFactors(op);
    if (failed(read))
      return op->emitOpError("has no factor sharding (run dtc-sharding-propagation)");
    const FactorShardings& factors = *read;
    const OpShardingRule& rule = rules_[op];

    ArrayAttr carried = carriedPartial(op, rule, factors);
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      FailureOr<Value> v =
          reshard(op->getOperand(i),
                  project(ctx, rule.operands[i], rule.operandMult[i], factors, carried), op);
      if (failed(v)) return failure();
      op->setOperand(i, *v);
    }
    SmallVector<Attribute> shardings;
    for (auto [j, result] : llvm::enumerate(op->getResults())) {
      ArrayAttr partial = partialAxes(ctx, rule, j, factors);
      if (carried) {
        SmallVector<Attribute> both(carried.begin(), carried.end());
        both.append(partial.begin(), partial.end());
        partial = b_.getArrayAttr(both);
      }
      dist::ShardingAttr s = project(ctx, rule.results[j], rule.resultMult[j], factors, partial,
                                     maxAxes(ctx, rule, j, factors));
      actual_[result] = s;
      result.setType(localType(global_[result], s));
      shardings.push_back(s);
    }
    op->removeAttr(dist::kFactorsAttr);
    op->removeAttr(dist::kFactorBlocksAttr);
    // Ops that index a split vocabulary need to know where their block starts.
    int vocab = -1;
    if (isa<graph::EmbeddingOp>(op))
      vocab = rule.operands[0][0];
    else if (isa<graph::EmbeddingGradOp>(op))
      vocab = rule.results[0][0];
    else if (isa<graph::CrossEntropyPartsOp>(op))
      vocab = rule.operands[0].back();
    else if (isa<graph::CrossEntropyPartsGradOp>(op))
      vocab = rule.operands[1].back();
    if (vocab >= 0 && !cast<ArrayAttr>(factors.axes[vocab]).empty()) {
      op->setAttr("vocab_axes", factors.axes[vocab]);
      if (auto grad = dyn_cast<graph::EmbeddingGradOp>(op))  // its rows: this device's block
        grad.setVocab(cast<RankedTensorType>(grad.getResult().getType()).getDimSize(0));
    }
    // Attention on a block of the queries places them by the axes that split them.
    if (isa<graph::CausalAttentionOp, graph::CausalAttentionGradOp>(op)) {
      const SmallVector<int>& q = rule.operands[isa<graph::CausalAttentionOp>(op) ? 0 : 1];
      const int queries = q[q.size() - 2];
      if (queries >= 0 && !cast<ArrayAttr>(factors.axes[queries]).empty())
        op->setAttr("seq_axes", factors.axes[queries]);
    }
    if (auto dropout = dyn_cast<graph::DropoutOp>(op))
      if (failed(placeDropout(dropout, cast<dist::ShardingAttr>(shardings.front()))))
        return failure();
    op->setAttr(dist::kShardingsAttr, b_.getArrayAttr(shardings));
    return success();
  }

  // Where this device's block of a dropout's tensor sits in the whole, so that it draws the
  // mask one device draws for those elements.
  LogicalResult placeDropout(graph::DropoutOp op, dist::ShardingAttr s) {
    SmallVector<int64_t> counts;
    SmallVector<Attribute> axes;
    for (auto [d, dim] : llvm::enumerate(s.getDims())) {
      auto list = cast<ArrayAttr>(dim);
      counts.push_back(static_cast<int64_t>(list.size()));
      axes.append(list.begin(), list.end());
      if (!list.empty() && s.dimBlocks(static_cast<int64_t>(d)) != 1)
        return op.emitOpError("cannot draw a dropout mask on a tensor split in chunks (dimension ")
               << d << ")";
    }
    op.setGlobalShape(global_[op.getY()].getShape());
    if (axes.empty()) return success();
    op.setSplitCountsAttr(b_.getDenseI64ArrayAttr(counts));
    op.setSplitAxesAttr(b_.getArrayAttr(axes));
    return success();
  }

  // Sums stay pending through ops that are linear in their operands: add and sub of operands
  // partial alike, and reduce_sum, reshape, transpose, broadcast and cast of a partial operand
  // (a bias gradient's reductions run locally and only the [C] result is all-reduced; a bf16
  // contraction's partial result is summed in f32). Null when the op needs its operands summed
  // first.
  ArrayAttr carriedPartial(Operation* op, const OpShardingRule& rule,
                           const FactorShardings& factors) {
    MLIRContext* ctx = op->getContext();
    bool linear =
        isa<graph::AddOp, graph::SubOp, graph::CastOp>(op) ||
        isa<graph::ReduceSumOp, graph::ReshapeOp, graph::TransposeOp, graph::BroadcastOp>(op);
    if (!linear) return {};
    ArrayAttr partial = actual_[op->getOperand(0)].getPartial();
    if (partial.empty()) return {};
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      dist::ShardingAttr have = actual_[v];
      dist::ShardingAttr want = project(ctx, rule.operands[i], rule.operandMult[i], factors);
      if (have.getPartial() != partial || have.getDims() != want.getDims() ||
          have.getBlocks() != want.getBlocks())
        return {};
    }
    // The carried axes must not also split a dimension of the result or be summed anew.
    for (auto [j, dims] : llvm::enumerate(rule.results)) {
      dist::ShardingAttr out =
          project(ctx, dims, rule.resultMult[j], factors, partialAxes(ctx, rule, j, factors));
      for (Attribute a : partial) {
        if (llvm::is_contained(out.getPartial(), a)) return {};
        for (Attribute d : out.getDims())
          if (llvm::is_contained(cast<ArrayAttr>(d), a)) return {};
      }
    }
    return partial;
  }

  // `value` with sharding `want`: the planner's collectives, inserted right after `value` is
  // produced (so reductions start as early as possible) and shared by every use that needs it.
  FailureOr<Value> reshard(Value value, dist::ShardingAttr want, Operation* user) {
    dist::ShardingAttr have = actual_[value];
    if (have == want) return value;
    auto key = std::make_pair(value, Attribute(want));
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;

    RankedTensorType global = global_[value];
    ReshardPlan plan = planReshard(plainMesh_, global.getShape().vec(), toLayout(mesh_, have),
                                   toLayout(mesh_, want));
    if (!plan.error.empty())
      return user->emitError("cannot reshard ")
             << describe(value) << " " << global << " from " << text(have) << " to " << text(want)
             << ": " << plan.error;
    if (auto arg = dyn_cast<BlockArgument>(value))
      b_.setInsertionPointToStart(arg.getOwner());
    else
      b_.setInsertionPointAfter(value.getDefiningOp());
    // After earlier reshards of the same value, keeping the program order of the collectives.
    if (Operation* last = lastInserted_.lookup(value)) b_.setInsertionPointAfter(last);

    Location loc = value.getLoc();
    Value cur = value;
    auto curType = cast<RankedTensorType>(value.getType());
    // Chunked dimensions are resharded in a row-major view: reshapes (views, no copies) in and
    // out.
    auto view = [&](ArrayRef<int64_t> shape) {
      if (curType.getShape() == shape) return;
      Operation* op = graph::ReshapeOp::create(b_, loc, curType.clone(shape), cur);
      cur = op->getResult(0);
      curType = cast<RankedTensorType>(cur.getType());
      lastInserted_[value] = op;
    };
    for (const ReshardPhase& phase : plan.phases) {
      view(phase.localShape(plainMesh_));
      for (const ReshardStep& step : phase.steps) {
        Operation* op = emitStep(step, cur, loc);
        cur = op->getResult(0);
        curType = cast<RankedTensorType>(cur.getType());
        lastInserted_[value] = op;
      }
    }
    view(localType(global, want).getShape());
    actual_[cur] = want;
    global_[cur] = global;
    cache_[key] = cur;
    return cur;
  }

  // One collective of a reshard plan on local value `cur`, at the builder's insertion point.
  Operation* emitStep(const ReshardStep& step, Value cur, Location loc) {
    SmallVector<Attribute> names;
    for (int a : step.axes) names.push_back(b_.getStringAttr(plainMesh_.names[a]));
    ArrayAttr axes = b_.getArrayAttr(names);
    int64_t n = plainMesh_.groupSize(step.axes);
    auto type = cast<RankedTensorType>(cur.getType());
    SmallVector<int64_t> shape(type.getShape());
    switch (step.kind) {
      case StepKind::kAllReduce:
        return dist::AllReduceOp::create(b_, loc, TypeRange{type}, ValueRange{cur}, axes,
                                         step.max ? "max" : "sum");
      case StepKind::kAllGather:
        shape[step.dim] *= n;
        return dist::AllGatherOp::create(b_, loc, type.clone(shape), cur, axes, step.dim);
      case StepKind::kReduceScatter:
        shape[step.dim] /= n;
        return dist::ReduceScatterOp::create(b_, loc, type.clone(shape), cur, axes, step.dim);
      case StepKind::kLocalSlice:
        shape[step.dim] /= n;
        return dist::LocalSliceOp::create(b_, loc, type.clone(shape), cur, axes, step.dim);
      case StepKind::kAllToAll:
        shape[step.dim] /= n;
        shape[step.concatDim] *= n;
        return dist::AllToAllOp::create(b_, loc, type.clone(shape), cur, axes, step.dim,
                                        step.concatDim);
    }
    llvm_unreachable("unknown reshard step");
  }

  func::FuncOp func_;
  dist::MeshAttr mesh_;
  Mesh plainMesh_;
  OpBuilder b_;
  DenseMap<Operation*, OpShardingRule> rules_;
  DenseMap<Value, RankedTensorType> global_;
  DenseMap<Value, dist::ShardingAttr> actual_;
  DenseMap<std::pair<Value, Attribute>, Value> cache_;
  DenseMap<Value, Operation*> lastInserted_;
};

// Whether `v`, read once, is a 16-bit projection's output widened to f32 (a cast of a linear or
// linear_grad_input), or a sum of such in f32 (the input gradient of projections reading one
// activation: q, k and v; gate and up); `low` is their type.
bool widenedProjections(Value v, Type& low) {
  if (!v.hasOneUse() || !graph::elementOf(v).isF32()) return false;
  if (auto widen = v.getDefiningOp<graph::CastOp>()) {
    Value narrow = widen->getOperand(0);
    if (!isa_and_nonnull<graph::LinearOp, graph::LinearGradInputOp>(narrow.getDefiningOp()))
      return false;
    Type t = graph::elementOf(narrow);
    if (!graph::is16BitFloat(t) || (low && t != low)) return false;
    low = t;
    return true;
  }
  auto add = v.getDefiningOp<graph::AddOp>();
  return add && widenedProjections(add->getOperand(0), low) &&
         widenedProjections(add->getOperand(1), low);
}

// A projection's partial result in half precision is summed before it widens to f32: the
// collective moves to the cast's operand and the cast to its result. Half the bytes on the wire,
// as Megatron-LM reduces its activations and their gradients (each rank's share was rounded to
// that type already). A sum of several projections' partials (the input gradient of q, k and
// v) is added in f32 and rounded to their type once before the collective, as a fused
// projection's output would be. Only the outputs of projections (linear, linear_grad_input):
// weight gradients keep their f32 sums.
void sumBeforeWidening(func::FuncOp func) {
  SmallVector<Operation*> collectives;
  func.walk([&](Operation* op) {
    if (isa<dist::ReduceScatterOp>(op) ||
        (isa<dist::AllReduceOp>(op) && op->getNumOperands() == 1 &&
         cast<dist::AllReduceOp>(op).getReduction() == "sum"))
      collectives.push_back(op);
  });
  for (Operation* op : collectives) {
    Value operand = op->getOperand(0);
    Type low;
    if (!widenedProjections(operand, low)) continue;
    OpBuilder b(op);
    auto widen = operand.getDefiningOp<graph::CastOp>();
    Value narrow =
        widen ? widen->getOperand(0)
              : graph::CastOp::create(b, op->getLoc(),
                                      cast<RankedTensorType>(operand.getType()).clone(low), operand)
                    .getResult();
    auto result = cast<RankedTensorType>(op->getResult(0).getType());
    Operation* sum;
    if (auto all = dyn_cast<dist::AllReduceOp>(op))
      sum = dist::AllReduceOp::create(b, op->getLoc(), TypeRange{narrow.getType()},
                                      ValueRange{narrow}, all.getAxes(), "sum");
    else
      sum = dist::ReduceScatterOp::create(b, op->getLoc(), result.clone(low), narrow,
                                          cast<dist::ReduceScatterOp>(op).getAxes(),
                                          cast<dist::ReduceScatterOp>(op).getDim());
    auto wide = graph::CastOp::create(b, op->getLoc(), result, sum->getResult(0));
    op->getResult(0).replaceAllUsesWith(wide.getResult());
    op->erase();
    if (widen) widen->erase();
  }
}

struct PartitionPass : public impl::PartitionBase<PartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    if (!mesh) {
      module.emitError("partition needs a `dist.mesh` module attribute");
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (failed(Partitioner(func, mesh).run())) return signalPassFailure();
      sumBeforeWidening(func);
    }
  }
};

}  // namespace
}  // namespace dtc::sharding
