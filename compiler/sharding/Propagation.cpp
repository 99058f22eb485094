// dtc-sharding-propagation: from a few annotations (user's or a strategy's) to a sharding of
// every dimension of every value and a factor sharding (`dist.factors`) of every op.
//
// Each dimension of each value is unknown or known with a priority (user annotations 0,
// propagated 1). An op's factor takes the axes of the best known dimension that belongs to it:
// lowest priority number first, then the most axes (more sharding, less memory and work per
// device), then the first operand or result. Unknown dimensions of the op's values then take
// their factor's axes. Forward and backward sweeps repeat until nothing changes; a dimension,
// once known, never changes, so this terminates. What stays unknown is replicated.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <numeric>
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallSet.h"

#include "FunctionAttrs.h"
#include "Passes.h"
#include "graph/IR/GraphDialect.h"
#include "planfile/function_names.h"
#include "sharding/ShardingUtils.h"

namespace dtc {
#define GEN_PASS_DEF_SHARDINGPROPAGATION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc::sharding {
namespace {

constexpr int kUser = 0, kPropagated = 1, kUnknown = 2;

struct DimState {
  ArrayAttr axes;  // null: unknown
  int priority = kUnknown;
  int64_t blocks = 1;  // chunks, each cut over `axes`
};

class Propagator {
 public:
  Propagator(func::FuncOp func, dist::MeshAttr mesh) : func_(func), mesh_(mesh), b_(func) {}

  LogicalResult run() {
    if (failed(seed())) return failure();
    // Rules and states are looked up many times per op and sweep: kept in vectors by op index,
    // and the value map sized once.
    SmallVector<Operation*> ops;
    size_t values = func_.getNumArguments();
    rules_.reserve(func_.getBody().front().getOperations().size());
    for (Operation& op : func_.getBody().front().without_terminator()) {
      FailureOr<OpShardingRule> rule = getShardingRule(&op);
      if (failed(rule)) return failure();
      rules_.push_back(std::move(*rule));
      ops.push_back(&op);
      values += op.getNumResults();
    }
    states_.reserve(values);
    settled_.assign(ops.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < ops.size(); ++i) changed |= apply(ops[i], i);
      for (size_t i = ops.size(); i-- > 0;) changed |= apply(ops[i], i);
    }
    finalize(ops);
    return success();
  }

 private:
  SmallVector<DimState>& state(Value v) {
    auto [it, inserted] = states_.try_emplace(v);
    if (inserted) it->second.resize(cast<RankedTensorType>(v.getType()).getRank());
    return it->second;
  }

  LogicalResult annotate(Value v, dist::ShardingAttr sharding, Operation* where) {
    auto type = cast<RankedTensorType>(v.getType());
    if (auto error = sharding.check(mesh_, type.getShape()))
      return where->emitError("cannot shard ") << describe(v) << " " << type << ": " << *error;
    SmallVector<DimState>& dims = state(v);
    for (auto [d, dim] : llvm::enumerate(dims))
      if (dim.priority > kUser) dim = {sharding.dimAxes(d), kUser, sharding.dimBlocks(d)};
    return success();
  }

  LogicalResult seed() {
    for (BlockArgument arg : func_.getArguments())
      if (auto s =
              func_.getArgAttrOfType<dist::ShardingAttr>(arg.getArgNumber(), dist::kShardingAttr))
        if (failed(annotate(arg, s, func_))) return failure();
    Operation* ret = func_.getBody().front().getTerminator();
    for (auto [i, v] : llvm::enumerate(ret->getOperands()))
      if (auto s = func_.getResultAttrOfType<dist::ShardingAttr>(i, dist::kShardingAttr))
        if (failed(annotate(v, s, ret))) return failure();
    for (Operation& op : func_.getBody().front().without_terminator()) {
      if (auto reshard = dyn_cast<dist::ReshardOp>(op))
        if (failed(annotate(reshard.getResult(), reshard.getSharding(), &op))) return failure();
      if (auto list = op.getAttrOfType<ArrayAttr>(dist::kShardingsAttr))
        for (auto [v, s] : llvm::zip(op.getResults(), list))
          if (failed(annotate(v, cast<dist::ShardingAttr>(s), &op))) return failure();
    }
    return success();
  }

  // The op's factor shardings (`known[f]`: some dimension of factor f is known).
  FactorShardings chooseFactors(Operation* op, const OpShardingRule& rule,
                                SmallVectorImpl<bool>& known) {
    SmallVector<DimState> best(rule.numFactors);
    auto visit = [&](Value v, ArrayRef<int> dims, ArrayRef<int64_t> mult) {
      SmallVector<DimState>& st = state(v);
      for (auto [d, f] : llvm::enumerate(dims)) {
        if (f < 0 || !st[d].axes) continue;
        // The factor's chunks: the dimension's, divided by how often it holds the factor.
        DimState candidate = st[d];
        candidate.blocks = candidate.axes.empty() ? 1 : st[d].blocks / mult[d];
        if (!candidate.axes.empty() &&
            (st[d].blocks % mult[d] != 0 || (rule.plainOnly[f] && candidate.blocks != 1)))
          continue;  // a layout this op cannot carry through
        DimState& cur = best[f];
        if (candidate.priority < cur.priority ||
            (candidate.priority == cur.priority && candidate.axes.size() > cur.axes.size()))
          cur = candidate;
      }
    };
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      visit(v, rule.operands[i], rule.operandMult[i]);
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      visit(v, rule.results[i], rule.resultMult[i]);

    // An axis shards one factor only (the first to claim it), and only as far as every
    // dimension of the factor divides.
    // Factors claim axes in priority order (a user's split beats a propagated one); among
    // equals, the factor that more data is already split along goes first (the loser's values
    // get resharded, so that is what a wrong choice costs); then factor order. Only data laid
    // out as the factor would be counts: a dimension split over some of its axes (cp of cp and
    // tp) is resharded whichever factor goes first.
    SmallVector<int64_t> laidOut(rule.numFactors, 0);
    auto weigh = [&](Value v, ArrayRef<int> dims) {
      auto type = cast<RankedTensorType>(v.getType());
      SmallVector<DimState>& st = state(v);
      for (auto [d, f] : llvm::enumerate(dims))
        if (f >= 0 && st[d].axes && !st[d].axes.empty() && st[d].axes == best[f].axes)
          laidOut[f] += type.getNumElements();
    };
    for (auto [i, v] : llvm::enumerate(op->getOperands())) weigh(v, rule.operands[i]);
    for (auto [i, v] : llvm::enumerate(op->getResults())) weigh(v, rule.results[i]);
    // A factor no result carries (a contraction's) leaves the results partial when it goes
    // first: their sum over its axes is what that choice costs (a weight gradient split by
    // tokens is reduced whole, where splitting it by the weight's rows needs its input gathered).
    for (int f = 0; f < rule.numFactors; ++f) {
      if (!laidOut[f]) continue;
      bool carried = false;
      for (const SmallVector<int>& dims : rule.results) carried |= llvm::is_contained(dims, f);
      if (carried) continue;
      for (Value r : op->getResults())
        laidOut[f] -= cast<RankedTensorType>(r.getType()).getNumElements();
    }
    SmallVector<int> order(rule.numFactors);
    std::iota(order.begin(), order.end(), 0);
    llvm::stable_sort(order, [&](int a, int b) {
      if (best[a].priority != best[b].priority) return best[a].priority < best[b].priority;
      return laidOut[a] > laidOut[b];
    });
    llvm::SmallSet<StringRef, 4> used;
    SmallVector<Attribute> factors(rule.numFactors, b_.getArrayAttr({}));
    FactorShardings out;
    out.blocks.assign(rule.numFactors, 1);
    known.assign(rule.numFactors, false);
    for (int f : order) {
      known[f] = static_cast<bool>(best[f].axes);
      SmallVector<Attribute> axes;
      if (best[f].axes)
        for (Attribute a : best[f].axes)
          if (!used.contains(cast<StringAttr>(a).getValue())) axes.push_back(a);
      while (!axes.empty() && !divides(op, rule, f, b_.getArrayAttr(axes), best[f].blocks))
        axes.pop_back();
      for (Attribute a : axes) used.insert(cast<StringAttr>(a).getValue());
      factors[f] = b_.getArrayAttr(axes);
      out.blocks[f] = axes.empty() ? 1 : best[f].blocks;
    }
    out.axes = b_.getArrayAttr(factors);
    return out;
  }

  bool divides(Operation* op, const OpShardingRule& rule, int f, ArrayAttr axes, int64_t blocks) {
    int64_t parts = mesh_.groupSize(axes) * blocks;
    auto check = [&](Value v, ArrayRef<int> dims, ArrayRef<int64_t> mult) {
      auto shape = cast<RankedTensorType>(v.getType()).getShape();
      for (auto [d, g] : llvm::enumerate(dims))
        if (g == f && shape[d] % (parts * mult[d]) != 0) return false;
      return true;
    };
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (!check(v, rule.operands[i], rule.operandMult[i])) return false;
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      if (!check(v, rule.results[i], rule.resultMult[i])) return false;
    return true;
  }

  // Whether some dimension of the op's values that carries a factor has no layout yet (only
  // those can change: a known layout stays).
  bool hasOpenDims(Operation* op, const OpShardingRule& rule) {
    auto open = [&](Value v, ArrayRef<int> dims) {
      SmallVector<DimState>& st = state(v);
      for (auto [d, f] : llvm::enumerate(dims))
        if (f >= 0 && !st[d].axes) return true;
      return false;
    };
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (open(v, rule.operands[i])) return true;
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      if (open(v, rule.results[i])) return true;
    return false;
  }

  // Op number `index` (in body order).
  bool apply(Operation* op, size_t index) {
    // An op whose every factor-carrying dimension is laid out is settled for good; the sweeps
    // that look for the fixed point skip it instead of choosing its factors again.
    if (settled_[index]) return false;
    const OpShardingRule& rule = rules_[index];
    if (!hasOpenDims(op, rule)) {
      settled_[index] = true;
      return false;
    }
    SmallVector<bool> known;
    FactorShardings factors = chooseFactors(op, rule, known);
    bool changed = false;
    auto fill = [&](Value v, ArrayRef<int> dims, ArrayRef<int64_t> mult) {
      SmallVector<DimState>& st = state(v);
      for (auto [d, f] : llvm::enumerate(dims))
        if (f >= 0 && known[f] && !st[d].axes) {
          auto axes = cast<ArrayAttr>(factors.axes[f]);
          st[d] = {axes, kPropagated, axes.empty() ? 1 : factors.blocks[f] * mult[d]};
          changed = true;
        }
    };
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      fill(v, rule.operands[i], rule.operandMult[i]);
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      fill(v, rule.results[i], rule.resultMult[i]);
    return changed;
  }

  dist::ShardingAttr finalSharding(Value v) {
    SmallVector<Attribute> dims;
    SmallVector<int64_t> blocks;
    for (DimState& d : state(v)) {
      dims.push_back(d.axes ? d.axes : b_.getArrayAttr({}));
      blocks.push_back(d.axes && !d.axes.empty() ? d.blocks : 1);
    }
    return dist::ShardingAttr::get(b_.getContext(), b_.getArrayAttr(dims), b_.getArrayAttr({}),
                                   ArrayRef<int64_t>(blocks));
  }

  void finalize(ArrayRef<Operation*> ops) {
    MLIRContext* ctx = b_.getContext();
    FunctionAttrEdits edits(func_);
    for (BlockArgument arg : func_.getArguments())
      edits.setArgAttr(arg.getArgNumber(), dist::kShardingAttr, finalSharding(arg));
    for (auto [index, op] : llvm::enumerate(ops)) {
      const OpShardingRule& rule = rules_[index];
      SmallVector<bool> known;
      FactorShardings factors = chooseFactors(op, rule, known);
      writeFactors(op, factors);
      SmallVector<Attribute> results;
      for (auto [j, dims] : llvm::enumerate(rule.results))
        results.push_back(project(ctx, dims, rule.resultMult[j], factors,
                                  partialAxes(ctx, rule, j, factors),
                                  maxAxes(ctx, rule, j, factors)));
      op->setAttr(dist::kShardingsAttr, b_.getArrayAttr(results));
    }
    // Results must come out as the caller expects: annotated, or an updated state tensor's own
    // sharding (state persists across steps), or as propagated, summed.
    llvm::StringMap<dist::ShardingAttr> stateShardings;
    for (BlockArgument arg : func_.getArguments())
      for (const char* role : {attr::kParam, attr::kState})
        if (auto name = func_.getArgAttrOfType<StringAttr>(arg.getArgNumber(), role))
          stateShardings[name.getValue()] = finalSharding(arg);
    Operation* ret = func_.getBody().front().getTerminator();
    for (auto [i, v] : llvm::enumerate(ret->getOperands())) {
      if (func_.getResultAttr(i, dist::kShardingAttr)) continue;
      dist::ShardingAttr want = finalSharding(v);
      if (auto upd = func_.getResultAttrOfType<StringAttr>(i, attr::kUpdates))
        if (auto it = stateShardings.find(upd.getValue()); it != stateShardings.end())
          want = it->second;
      edits.setResultAttr(i, dist::kShardingAttr, want);
    }
    edits.apply();
  }

  func::FuncOp func_;
  dist::MeshAttr mesh_;
  OpBuilder b_;
  DenseMap<Value, SmallVector<DimState>> states_;
  std::vector<OpShardingRule> rules_;  // by op index
  std::vector<bool> settled_;          // ops apply() can no longer change
};

struct ShardingPropagationPass : public impl::ShardingPropagationBase<ShardingPropagationPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<dist::MeshAttr>(dist::kMeshAttr);
    if (!mesh) {
      module.emitError("sharding propagation needs a `dist.mesh` module attribute");
      return signalPassFailure();
    }
    // Parameters and optimizer state live in one storage that every function reads: the
    // training step decides their shardings, the other functions take them as given.
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    llvm::stable_sort(funcs, [](func::FuncOp a, func::FuncOp b) {
      return a.getSymName() == fn::kTrainStep && b.getSymName() != fn::kTrainStep;
    });
    llvm::StringMap<dist::ShardingAttr> stateShardings;
    for (func::FuncOp func : funcs) {
      FunctionAttrEdits edits(func);
      for (BlockArgument arg : func.getArguments()) {
        StringAttr name = stateName(func, arg.getArgNumber());
        auto it = name ? stateShardings.find(name.getValue()) : stateShardings.end();
        if (it == stateShardings.end()) continue;
        auto own =
            func.getArgAttrOfType<dist::ShardingAttr>(arg.getArgNumber(), dist::kShardingAttr);
        if (own && own != it->second) {
          func.emitError("tensor '") << name.getValue() << "' is annotated differently in @"
                                     << func.getSymName() << " and @train_step";
          return signalPassFailure();
        }
        edits.setArgAttr(arg.getArgNumber(), dist::kShardingAttr, it->second);
      }
      edits.apply();
      if (failed(Propagator(func, mesh).run())) return signalPassFailure();
      for (BlockArgument arg : func.getArguments())
        if (StringAttr name = stateName(func, arg.getArgNumber()))
          stateShardings.try_emplace(name.getValue(), func.getArgAttrOfType<dist::ShardingAttr>(
                                                          arg.getArgNumber(), dist::kShardingAttr));
    }
  }

  static StringAttr stateName(func::FuncOp func, unsigned i) {
    if (auto p = func.getArgAttrOfType<StringAttr>(i, attr::kParam)) return p;
    return func.getArgAttrOfType<StringAttr>(i, attr::kState);
  }
};

}  // namespace
}  // namespace dtc::sharding
