// Attention on the fused projection as a pattern of the lowering (see lowering/PackedAttention.h).
#include "lowering/PackedAttention.h"

#include <optional>

#include "llvm/ADT/SetVector.h"
#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "graph/IR/GraphOps.h"
#include "plan/IR/PlanOps.h"

using namespace mlir;

namespace dtc {
namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

bool swapsHeadsAndTime(graph::TransposeOp t) {
  return t && t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3};
}

// [B, T, C] reshaped to [B, T, H, D] (H·D = C), or the reverse when `merge`.
bool splitsHeads(graph::ReshapeOp r, bool merge) {
  if (!r) return false;
  ArrayRef<int64_t> from = shapeOf(r->getOperand(0)), to = shapeOf(r.getResult());
  if (merge) std::swap(from, to);
  return from.size() == 3 && to.size() == 4 && from[0] == to[0] && from[1] == to[1] &&
         to[2] * to[3] == from[2];
}

// value = transpose(reshape(split(qkv)#part)): one head block of the fused projection.
struct Heads {
  graph::SplitOp split;
  unsigned part = 0;
  SmallVector<Operation*> ops;  // the reshape and the transpose
};

std::optional<Heads> headsOf(Value value) {
  auto transpose = value.getDefiningOp<graph::TransposeOp>();
  if (!swapsHeadsAndTime(transpose)) return std::nullopt;
  auto reshape = transpose.getX().getDefiningOp<graph::ReshapeOp>();
  if (!splitsHeads(reshape, false)) return std::nullopt;
  auto piece = dyn_cast<OpResult>(reshape->getOperand(0));
  auto split = piece ? dyn_cast<graph::SplitOp>(piece.getOwner()) : nullptr;
  if (!split || split.getParts() != 3 || split.getAxis() != 2 || split.getSizes() ||
      shapeOf(split.getX()).size() != 3)
    return std::nullopt;
  return Heads{split, piece.getResultNumber(), {reshape, transpose}};
}

// The [B, T, C] value that `heads` [B, H, T, D] is the unmerged form of: reshape then transpose.
Value unmergedFrom(Value heads, SmallVectorImpl<Operation*>& ops) {
  auto transpose = heads.getDefiningOp<graph::TransposeOp>();
  if (!swapsHeadsAndTime(transpose)) return nullptr;
  auto reshape = transpose.getX().getDefiningOp<graph::ReshapeOp>();
  if (!splitsHeads(reshape, false)) return nullptr;
  ops.append({transpose, reshape});
  return reshape->getOperand(0);
}

// The [B, T, C] value `heads` [B, H, T, D] is merged into: its one transpose, whose one reader is
// the reshape; null if it has other readers than those and `allowed`.
Value mergedInto(Value heads, function_ref<bool(Operation*)> allowed,
                 SmallVectorImpl<Operation*>& ops) {
  Value merged;
  for (Operation* user : heads.getUsers()) {
    if (allowed(user)) continue;
    auto transpose = dyn_cast<graph::TransposeOp>(user);
    if (merged || !swapsHeadsAndTime(transpose) || !transpose.getResult().hasOneUse())
      return nullptr;
    auto reshape = dyn_cast<graph::ReshapeOp>(*transpose.getResult().user_begin());
    if (!splitsHeads(reshape, true)) return nullptr;
    ops.append({transpose, reshape});
    merged = reshape.getResult();
  }
  return merged;
}

// A gradient of `attention` that the pattern takes whole: dout unmerged from [B, T, C], q, k, v
// and the outputs the forward's, and dq, dk, dv merged and concatenated into dqkv in order.
struct Backward {
  graph::CausalAttentionGradOp grad;
  Value dout;                   // [B, T, C]
  graph::ConcatOp concat;       // dqkv
  SmallVector<Operation*> ops;  // the layout ops it replaces
};

std::optional<Backward> backwardOf(graph::CausalAttentionGradOp grad,
                                   graph::CausalAttentionOp attention) {
  if (grad.getQ() != attention.getQ() || grad.getK() != attention.getK() ||
      grad.getV() != attention.getV() || grad.getOut() != attention.getOut() ||
      grad.getLse() != attention.getLse())
    return std::nullopt;
  Backward b{grad, nullptr, nullptr, {}};
  b.dout = unmergedFrom(grad.getDout(), b.ops);
  if (!b.dout) return std::nullopt;
  for (auto [part, d] : llvm::enumerate(grad->getResults())) {
    SmallVector<Operation*> ops;
    Value merged = d.hasOneUse() ? mergedInto(
                                       d, [](Operation*) { return false; }, ops)
                                 : nullptr;
    if (!merged || !merged.hasOneUse()) return std::nullopt;
    auto concat = dyn_cast<graph::ConcatOp>(*merged.user_begin());
    if (!concat || concat.getAxis() != 2 || concat.getPieces().size() != 3 ||
        concat.getPieces()[part] != merged || (b.concat && b.concat != concat))
      return std::nullopt;
    b.concat = concat;
    b.ops.append(ops);
  }
  return b;
}

plan::KernelOp call(OpBuilder& b, Location loc, StringRef kernel, TypeRange results,
                    ValueRange operands, float scale, int64_t heads) {
  return plan::KernelOp::create(
      b, loc, results, operands, b.getStringAttr(kernel),
      b.getDictionaryAttr({b.getNamedAttr("heads", b.getI64IntegerAttr(heads)),
                           b.getNamedAttr("scale", b.getF32FloatAttr(scale))}));
}

// Erases what the fused calls left without readers, readers first.
void eraseDead(ArrayRef<Operation*> ops) {
  llvm::SetVector<Operation*> pending(ops.begin(), ops.end());
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation* op : pending) {
      if (!op || !op->use_empty()) continue;
      pending.remove(op);
      op->erase();
      erased = true;
      break;
    }
  }
}

void pack(graph::CausalAttentionOp attention, OpBuilder& b) {
  // A block of the sequence (context parallelism) keeps its positions' attributes.
  if (attention->hasAttr("seq_axes")) return;
  std::optional<Heads> q = headsOf(attention.getQ()), k = headsOf(attention.getK()),
                       v = headsOf(attention.getV());
  if (!q || !k || !v || q->split != k->split || k->split != v->split || q->part != 0 ||
      k->part != 1 || v->part != 2)
    return;
  SmallVector<Backward> backward;
  llvm::SetVector<Operation*> users(attention->user_begin(), attention->user_end());
  for (Operation* user : users) {
    auto grad = dyn_cast<graph::CausalAttentionGradOp>(user);
    if (!grad) continue;
    std::optional<Backward> found = backwardOf(grad, attention);
    if (!found) return;
    backward.push_back(*found);
  }
  const auto isGrad = [](Operation* op) { return isa<graph::CausalAttentionGradOp>(op); };
  SmallVector<Operation*> dead{attention};
  Value merged = mergedInto(attention.getOut(), isGrad, dead);
  if (!merged) return;
  for (Operation* user : attention.getLse().getUsers())
    if (!isGrad(user)) return;

  Value qkv = q->split.getX();
  const int64_t heads = shapeOf(attention.getQ())[1];
  const float scale = attention.getScale().convertToFloat();
  b.setInsertionPoint(attention);
  plan::KernelOp forward =
      call(b, attention.getLoc(), "causal_attention_qkv",
           {merged.getType(), attention.getLse().getType()}, {qkv}, scale, heads);
  inheritMarks(attention, forward);
  merged.replaceAllUsesWith(forward->getResult(0));
  for (Backward& g : backward) {
    b.setInsertionPoint(g.concat);
    plan::KernelOp fused =
        call(b, g.grad.getLoc(), "causal_attention_qkv_grad", {g.concat.getType()},
             {g.dout, qkv, forward->getResult(0), forward->getResult(1)}, scale, heads);
    inheritMarks(g.grad, fused);
    g.concat.getResult().replaceAllUsesWith(fused->getResult(0));
    dead.append({g.concat, g.grad});
    dead.append(g.ops);
  }
  attention.getLse().replaceAllUsesWith(forward->getResult(1));
  dead.append(q->ops);
  dead.append(k->ops);
  dead.append(v->ops);
  dead.push_back(q->split);
  eraseDead(dead);
}

}  // namespace

void packAttention(func::FuncOp function) {
  SmallVector<graph::CausalAttentionOp> attentions;
  function.walk([&](graph::CausalAttentionOp op) { attentions.push_back(op); });
  OpBuilder b(function.getContext());
  for (graph::CausalAttentionOp attention : attentions) pack(attention, b);
}

}  // namespace dtc
