// dtc-fuse-rotary: rotary position embeddings as exporters and the zoo spell them,
// x·cos + concat(−x₂, x₁)·sin with x₁, x₂ the halves of x's last dimension, become one rotary op.
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "Passes.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_FUSEROTARY
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// A table the step reads and nothing trains: an argument of the function that is not trainable.
bool isTable(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  return func && !func.getArgAttr(arg.getArgNumber(), attr::kTrainable);
}

// Piece `index` of two equal halves of x's last dimension, or null.
Value halfOf(Value piece, int64_t index) {
  auto split = piece.getDefiningOp<graph::SplitOp>();
  if (!split || split.getParts() != 2 || cast<OpResult>(piece).getResultNumber() != index)
    return nullptr;
  auto type = cast<RankedTensorType>(split.getX().getType());
  if (static_cast<int64_t>(split.getAxis()) != type.getRank() - 1) return nullptr;
  if (auto sizes = split.getSizes(); sizes && (*sizes)[0] != (*sizes)[1]) return nullptr;
  return split.getX();
}

struct Rotation {
  Value x, cos, sin;
  SmallVector<Operation*> interior;  // the ops the rotary op replaces, root first
};

// add(x·cos, concat(−x₂, x₁)·sin), every interior value read only inside the match.
std::optional<Rotation> matchRotation(graph::AddOp add) {
  for (auto [c, s] : {std::pair{add.getLhs(), add.getRhs()}, {add.getRhs(), add.getLhs()}}) {
    auto mulCos = c.getDefiningOp<graph::MulOp>(), mulSin = s.getDefiningOp<graph::MulOp>();
    if (!mulCos || !mulSin || !c.hasOneUse() || !s.hasOneUse()) continue;
    for (auto [rot, sin] :
         {std::pair{mulSin.getLhs(), mulSin.getRhs()}, {mulSin.getRhs(), mulSin.getLhs()}}) {
      auto concat = rot.getDefiningOp<graph::ConcatOp>();
      if (!concat || !rot.hasOneUse() || concat.getPieces().size() != 2) continue;
      auto type = cast<RankedTensorType>(rot.getType());
      if (static_cast<int64_t>(concat.getAxis()) != type.getRank() - 1) continue;
      auto negate = concat.getPieces()[0].getDefiningOp<graph::ScaleOp>();
      if (!negate || negate.getFactor().convertToFloat() != -1.0f ||
          !concat.getPieces()[0].hasOneUse())
        continue;
      Value x = halfOf(negate.getX(), 1);
      if (!x || halfOf(concat.getPieces()[1], 0) != x) continue;
      for (auto [xc, cos] :
           {std::pair{mulCos.getLhs(), mulCos.getRhs()}, {mulCos.getRhs(), mulCos.getLhs()}}) {
        if (xc != x || !isTable(cos) || !isTable(sin) || x.getType() != add.getType() ||
            graph::RotaryOp::checkShapes(cast<RankedTensorType>(x.getType()).getShape(),
                                         cast<RankedTensorType>(cos.getType()).getShape(),
                                         cast<RankedTensorType>(sin.getType()).getShape()))
          continue;
        return Rotation{x, cos, sin, {add, mulSin, mulCos, concat, negate}};
      }
    }
  }
  return std::nullopt;
}

struct FuseRotaryPass : impl::FuseRotaryBase<FuseRotaryPass> {
  void runOnOperation() override {
    auto forward = getOperation().lookupSymbol<func::FuncOp>(fn::kForward);
    if (!forward) {
      getOperation().emitError("dtc-fuse-rotary: the module has no @forward function");
      return signalPassFailure();
    }
    SmallVector<graph::AddOp> adds;
    forward.walk([&](graph::AddOp op) { adds.push_back(op); });
    OpBuilder b(forward.getContext());
    for (graph::AddOp add : adds) {
      std::optional<Rotation> r = matchRotation(add);
      if (!r) continue;
      b.setInsertionPoint(add);
      auto rotary = graph::RotaryOp::create(b, add.getLoc(), r->x.getType(), r->x, r->cos, r->sin);
      add.getResult().replaceAllUsesWith(rotary.getY());
      llvm::SetVector<Operation*> splits;
      for (Operation* op : r->interior)
        for (Value operand : op->getOperands())
          if (auto split = operand.getDefiningOp<graph::SplitOp>()) splits.insert(split);
      for (Operation* op : r->interior) op->erase();
      for (Operation* split : splits)
        if (split->use_empty()) split->erase();
    }
  }
};

}  // namespace
}  // namespace dtc
