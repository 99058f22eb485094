// dtc-fold-casts: under mixed precision, layout ops move 16-bit data, a widening cast that
// meets a narrowing one disappears, and producers that can round write 16 bits themselves (see
// Passes.td). Every rewrite is exact: widening is exact, rounding commutes with moving
// elements, and rounding in the producer is the cast's rounding.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "OpMarks.h"
#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"
#include "precision/Fp8Folds.h"

namespace dtc {
#define GEN_PASS_DEF_FOLDCASTS
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// A cast from a 16-bit type to f32.
graph::CastOp widening(Value value) {
  auto cast = value.getDefiningOp<graph::CastOp>();
  if (!cast || !graph::is16BitFloat(graph::elementOf(cast.getX())) ||
      !graph::elementOf(cast.getY()).isF32())
    return nullptr;
  return cast;
}

bool isNarrowing(graph::CastOp cast) {
  return graph::elementOf(cast.getX()).isF32() &&
         graph::is16BitFloat(graph::elementOf(cast.getY()));
}

Type withElement(Type type, Type element) { return cast<RankedTensorType>(type).clone(element); }

Value castTo(PatternRewriter& rewriter, Operation* at, Value value, Type element) {
  auto cast =
      graph::CastOp::create(rewriter, at->getLoc(), withElement(value.getType(), element), value);
  inheritMarks(at, cast);
  return cast.getY();
}

// The layout op `op` rebuilt on `inputs` (its operands in another element type).
Operation* rebuildLayout(PatternRewriter& rewriter, Operation* op, ValueRange inputs,
                         Type element) {
  Operation* rebuilt = nullptr;
  if (auto transpose = dyn_cast<graph::TransposeOp>(op))
    rebuilt =
        graph::TransposeOp::create(rewriter, op->getLoc(), inputs[0], transpose.getPermAttr());
  else if (auto reshape = dyn_cast<graph::ReshapeOp>(op))
    rebuilt = graph::ReshapeOp::create(rewriter, op->getLoc(),
                                       withElement(reshape.getType(), element), inputs[0]);
  else if (auto split = dyn_cast<graph::SplitOp>(op))
    rebuilt = graph::SplitOp::create(rewriter, op->getLoc(), inputs[0], split.getAxisAttr(),
                                     split.getPartsAttr(), split.getSizesAttr());
  else if (auto concat = dyn_cast<graph::ConcatOp>(op))
    rebuilt = graph::ConcatOp::create(rewriter, op->getLoc(), inputs, concat.getAxisAttr());
  else if (auto gather = dyn_cast<dist::AllGatherOp>(op))
    rebuilt =
        dist::AllGatherOp::create(rewriter, op->getLoc(), withElement(gather.getType(), element),
                                  inputs[0], gather.getAxesAttr(), gather.getDimAttr());
  inheritMarks(op, rebuilt);
  return rebuilt;
}

// An all-gather moves elements too: gathering 16-bit values halves its bytes (ZeRO-3 gathers a
// parameter's shard in the compute type, as FSDP's mixed precision does).
bool isLayout(Operation* op) {
  return isa_and_nonnull<graph::TransposeOp, graph::ReshapeOp, graph::SplitOp, graph::ConcatOp,
                         dist::AllGatherOp>(op);
}

// cast(cast(x: T → f32) → T) is x.
struct CancelRoundTrip : OpRewritePattern<graph::CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::CastOp cast, PatternRewriter& rewriter) const override {
    graph::CastOp wide = widening(cast.getX());
    if (!wide || wide.getX().getType() != cast.getType()) return failure();
    rewriter.replaceOp(cast, wide.getX());
    return success();
  }
};

// layout(cast(x: T → f32)) becomes cast(layout(x)): the layout op moves T, and the widening
// cast moves down toward a narrowing one it may cancel with. Every operand must be such a cast
// used only here (otherwise the f32 copy stays and the new cast adds a pass).
struct SinkWidening : RewritePattern {
  explicit SinkWidening(MLIRContext* ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation* op, PatternRewriter& rewriter) const override {
    if (!isLayout(op) || op->getNumOperands() == 0) return failure();
    SmallVector<Value> narrow;
    Type element;
    for (Value operand : op->getOperands()) {
      graph::CastOp wide = widening(operand);
      if (!wide || !operand.hasOneUse()) return failure();
      Type t = graph::elementOf(wide.getX());
      if (element && t != element) return failure();
      element = t;
      narrow.push_back(wide.getX());
    }
    Operation* rebuilt = rebuildLayout(rewriter, op, narrow, element);
    SmallVector<Value> results;
    for (Value r : rebuilt->getResults())
      results.push_back(castTo(rewriter, op, r, rewriter.getF32Type()));
    rewriter.replaceOp(op, results);
    return success();
  }
};

// cast(layout(y: f32) → T) becomes layout(cast(y)) when the layout op's results are used only
// by such casts: the layout op moves T, and the narrowing cast moves up toward a widening one.
struct HoistNarrowing : RewritePattern {
  explicit HoistNarrowing(MLIRContext* ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation* op, PatternRewriter& rewriter) const override {
    if (!isLayout(op) || op->getNumOperands() == 0) return failure();
    SmallVector<graph::CastOp> casts;
    Type element;
    for (Value r : op->getResults()) {
      if (!r.hasOneUse()) return failure();
      auto cast = dyn_cast<graph::CastOp>(*r.user_begin());
      if (!cast || !isNarrowing(cast)) return failure();
      Type t = graph::elementOf(cast.getY());
      if (element && t != element) return failure();
      element = t;
      casts.push_back(cast);
    }
    rewriter.setInsertionPoint(op);
    SmallVector<Value> narrow;
    for (Value operand : op->getOperands())
      narrow.push_back(castTo(rewriter, op, operand, element));
    Operation* rebuilt = rebuildLayout(rewriter, op, narrow, element);
    for (auto [cast, r] : llvm::zip(casts, rebuilt->getResults())) rewriter.replaceOp(cast, r);
    rewriter.eraseOp(op);
    return success();
  }
};

// A kernel takes one 16-bit type beside f32 ones: `low` must be the type of op's other 16-bit
// operands and results, if it has any.
bool sharesLowType(Operation* op, Type low) {
  for (Type t : llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto ranked = dyn_cast<RankedTensorType>(t);
    if (ranked && graph::is16BitFloat(ranked.getElementType()) && ranked.getElementType() != low)
      return false;
  }
  return true;
}

// cast(op.y: f32 → T) where op rounds its result y as the cast would and every reader of y is
// such a cast (LowPrecisionStorageOpInterface: the norms, SwiGLU, rotary and their gradients; the
// fused linear epilogues do the same as they are lowered): op writes T, the casts go.
struct AbsorbNarrowing : OpRewritePattern<graph::CastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::CastOp cast, PatternRewriter& rewriter) const override {
    auto y = dyn_cast<OpResult>(cast.getX());
    if (!y || !isNarrowing(cast)) return failure();
    auto storage = dyn_cast<graph::LowPrecisionStorageOpInterface>(y.getOwner());
    if (!storage || !storage.roundsResult(y.getResultNumber()) ||
        !sharesLowType(y.getOwner(), graph::elementOf(cast.getY())))
      return failure();
    SmallVector<graph::CastOp> casts;
    for (Operation* user : y.getUsers()) {
      auto other = dyn_cast<graph::CastOp>(user);
      if (!other || other.getType() != cast.getType()) return failure();
      casts.push_back(other);
    }
    rewriter.modifyOpInPlace(y.getOwner(), [&] { y.setType(cast.getType()); });
    for (graph::CastOp c : casts) rewriter.replaceOp(c, y);
    return success();
  }
};

// op(cast(x: T → f32)) where op widens that operand as it loads it
// (LowPrecisionStorageOpInterface): op reads x, which is exact. The cast stays while others read
// it, so nothing is computed twice.
struct AbsorbWidening : OpInterfaceRewritePattern<graph::LowPrecisionStorageOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;
  LogicalResult matchAndRewrite(graph::LowPrecisionStorageOpInterface op,
                                PatternRewriter& rewriter) const override {
    for (OpOperand& operand : op->getOpOperands()) {
      graph::CastOp wide = widening(operand.get());
      if (!wide || !op.widensOperand(operand.getOperandNumber()) ||
          !sharesLowType(op, graph::elementOf(wide.getX())))
        continue;
      rewriter.modifyOpInPlace(op, [&] { operand.set(wide.getX()); });
      if (wide->use_empty()) rewriter.eraseOp(wide);
      return success();
    }
    return failure();
  }
};

struct FoldCastsPass : impl::FoldCastsBase<FoldCastsPass> {
  void runOnOperation() override {
    RewritePatternSet set(&getContext());
    set.add<CancelRoundTrip, SinkWidening, HoistNarrowing, AbsorbNarrowing, AbsorbWidening>(
        &getContext());
    populateFp8FoldPatterns(set);
    FrozenRewritePatternSet patterns(std::move(set));
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (failed(applyPatternsGreedily(function, patterns))) {
        function.emitError("dtc-fold-casts did not converge");
        return signalPassFailure();
      }
      shareArgumentCasts(function);
    }
  }

  // A function argument (a parameter: it does not change within the step) cast to one type is
  // cast once, by the first such cast, and every micro-batch's forward and backward read that
  // copy. Accumulation and pipelines repeat the casts per micro-batch, and each copy lived from
  // its micro-batch's forward to its backward: a pipeline stage held one 16-bit copy of its
  // weights per micro-batch in flight where Megatron-LM holds one.
  static void shareArgumentCasts(func::FuncOp function) {
    if (function.getBody().empty()) return;
    for (BlockArgument arg : function.getArguments()) {
      DenseMap<Type, graph::CastOp> first;
      SmallVector<graph::CastOp> casts;
      for (Operation* user : arg.getUsers())
        if (auto cast = dyn_cast<graph::CastOp>(user);
            cast && cast->getBlock() == &function.getBody().front())
          casts.push_back(cast);
      for (graph::CastOp cast : casts) {
        graph::CastOp& kept = first[cast.getType()];
        if (!kept || cast->isBeforeInBlock(kept)) kept = cast;
      }
      for (graph::CastOp cast : casts) {
        graph::CastOp kept = first[cast.getType()];
        if (cast == kept) continue;
        cast.getResult().replaceAllUsesWith(kept.getResult());
        cast->erase();
      }
    }
  }
};

}  // namespace
}  // namespace dtc
