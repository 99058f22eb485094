// Attention on the fused projection as a pattern of the lowering (see lowering/PackedAttention.h).
#include "lowering/PackedAttention.h"

#include <array>
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

// The [B, T, C] value that `heads` [B, H, T, D] is the unmerged form of: reshape then transpose.
Value unmergedFrom(Value heads, SmallVectorImpl<Operation*>& ops) {
  auto transpose = heads.getDefiningOp<graph::TransposeOp>();
  if (!swapsHeadsAndTime(transpose)) return nullptr;
  auto reshape = transpose.getX().getDefiningOp<graph::ReshapeOp>();
  if (!splitsHeads(reshape, false)) return nullptr;
  ops.append({transpose, reshape});
  return reshape->getOperand(0);
}

// value = transpose(reshape(split(qkv)#part)): one head block of the fused projection.
struct Heads {
  graph::SplitOp split;
  unsigned part = 0;
  SmallVector<Operation*> ops;  // the reshape and the transpose
};

std::optional<Heads> headsOf(Value value) {
  SmallVector<Operation*> ops;
  auto piece = dyn_cast_if_present<OpResult>(unmergedFrom(value, ops));
  auto split = piece ? dyn_cast<graph::SplitOp>(piece.getOwner()) : nullptr;
  if (!split || split.getParts() != 3 || split.getAxis() != 2 || split.getSizes() ||
      shapeOf(split.getX()).size() != 3)
    return std::nullopt;
  return Heads{split, piece.getResultNumber(), std::move(ops)};
}

// value = [rotary](transpose(reshape(rows))): the heads attention reads, of a projection's rows
// [B, T, C], rotated there where rotary embeddings are applied (q and k of Llama's blocks).
struct Projection {
  Value rows;
  graph::ReshapeOp heads;       // rows as [B, T, H, D]
  graph::RotaryOp rotary;       // or null
  SmallVector<Operation*> ops;  // the layout ops (and rotary) it replaces
};

std::optional<Projection> projectionOf(Value value) {
  Projection p;
  p.rotary = value.getDefiningOp<graph::RotaryOp>();
  p.rows = unmergedFrom(p.rotary ? p.rotary.getX() : value, p.ops);
  if (!p.rows) return std::nullopt;
  p.heads = cast<graph::ReshapeOp>(p.ops.back());
  if (p.rotary) p.ops.push_back(p.rotary);
  return p;
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

std::optional<Backward> backwardOf(graph::CausalAttentionGradOp grad) {
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

// A gradient of `attention` on three projections: dout unmerged from [B, T, C], and each of dq,
// dk, dv (through its rotary's gradient where the forward rotated it) merged into the rows'
// gradient [B, T, C].
struct ProjectionsBackward {
  graph::CausalAttentionGradOp grad;
  Value dout;
  std::array<Value, 3> merged;                // the rows' gradients the kernel replaces
  std::array<graph::RotaryGradOp, 3> rotary;  // each part's, or null
  SmallVector<Operation*> ops;
};

std::optional<ProjectionsBackward> projectionsBackwardOf(graph::CausalAttentionGradOp grad,
                                                         MutableArrayRef<Projection> forward) {
  ProjectionsBackward g{grad, nullptr, {}, {}, {}};
  g.dout = unmergedFrom(grad.getDout(), g.ops);
  if (!g.dout) return std::nullopt;
  for (auto [part, d] : llvm::enumerate(grad->getResults())) {
    if (!d.hasOneUse()) return std::nullopt;
    Value heads = d;
    if (graph::RotaryOp rotary = forward[part].rotary) {
      auto back = dyn_cast<graph::RotaryGradOp>(*d.user_begin());
      if (!back || back.getCos() != rotary.getCos() || back.getSin() != rotary.getSin() ||
          !back.getResult().hasOneUse())
        return std::nullopt;
      g.rotary[part] = back;
      g.ops.push_back(back);
      heads = back.getResult();
    }
    g.merged[part] = mergedInto(
        heads, [](Operation*) { return false; }, g.ops);
    if (!g.merged[part]) return std::nullopt;
  }
  return g;
}

// Each gradient of `attention` as `find` takes it whole; nullopt where one is not, or reads
// other q, k, v or outputs than the forward's.
template <typename Found, typename Find>
std::optional<SmallVector<Found>> gradientsOf(graph::CausalAttentionOp attention, Find find) {
  SmallVector<Found> found;
  llvm::SetVector<Operation*> users(attention->user_begin(), attention->user_end());
  for (Operation* user : users)
    if (auto grad = dyn_cast<graph::CausalAttentionGradOp>(user)) {
      if (grad.getQ() != attention.getQ() || grad.getK() != attention.getK() ||
          grad.getV() != attention.getV() || grad.getOut() != attention.getOut() ||
          grad.getLse() != attention.getLse())
        return std::nullopt;
      std::optional<Found> one = find(grad);
      if (!one) return std::nullopt;
      found.push_back(*one);
    }
  return found;
}

// The [B, T, C] value attention's output is merged into, where only its gradients read the
// output otherwise and the log-sum-exp at all; null if not.
Value mergedOutput(graph::CausalAttentionOp attention, SmallVectorImpl<Operation*>& dead) {
  const auto isGrad = [](Operation* op) { return isa<graph::CausalAttentionGradOp>(op); };
  Value merged = mergedInto(attention.getOut(), isGrad, dead);
  if (!merged || !llvm::all_of(attention.getLse().getUsers(), isGrad)) return nullptr;
  return merged;
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

void packProjections(graph::CausalAttentionOp attention, OpBuilder& b);

void pack(graph::CausalAttentionOp attention, OpBuilder& b) {
  // A block of the sequence (context parallelism) keeps its positions' attributes.
  if (attention->hasAttr("seq_axes")) return;
  std::optional<Heads> q = headsOf(attention.getQ()), k = headsOf(attention.getK()),
                       v = headsOf(attention.getV());
  if (!q || !k || !v || q->split != k->split || k->split != v->split || q->part != 0 ||
      k->part != 1 || v->part != 2)
    return packProjections(attention, b);
  std::optional<SmallVector<Backward>> backward = gradientsOf<Backward>(
      attention, [&](graph::CausalAttentionGradOp grad) { return backwardOf(grad); });
  SmallVector<Operation*> dead{attention};
  Value merged = backward ? mergedOutput(attention, dead) : nullptr;
  if (!merged) return;

  Value qkv = q->split.getX();
  const int64_t heads = shapeOf(attention.getQ())[1];
  const float scale = attention.getScale().convertToFloat();
  b.setInsertionPoint(attention);
  plan::KernelOp forward =
      call(b, attention.getLoc(), "causal_attention_qkv",
           {merged.getType(), attention.getLse().getType()}, {qkv}, scale, heads);
  inheritMarks(attention, forward);
  merged.replaceAllUsesWith(forward->getResult(0));
  for (Backward& g : *backward) {
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

// rows [B, T, H·D] as [B, T, H, D] (or back), a reshape the lowering makes an alias.
Value reshaped(OpBuilder& b, Location loc, Value rows, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, cast<RankedTensorType>(rows.getType()).getElementType());
  return graph::ReshapeOp::create(b, loc, type, rows).getResult();
}

// A rotary step on [B, T, H, D] rows (seq_major), in place of one on [B, H, T, D] heads.
Value rotatedRows(OpBuilder& b, Operation* rotary, Value rows, ArrayRef<int64_t> heads,
                  StringRef kernel) {
  Location loc = rotary->getLoc();
  Value x = reshaped(b, loc, rows, heads);
  auto step = plan::KernelOp::create(
      b, loc, {x.getType()}, {x, rotary->getOperand(1), rotary->getOperand(2)},
      b.getStringAttr(kernel),
      b.getDictionaryAttr({b.getNamedAttr("seq_major", b.getI64IntegerAttr(1))}));
  inheritMarks(rotary, step);
  return reshaped(b, loc, step->getResult(0), shapeOf(rows));
}

// Attention on three projections (or on pieces of one that are rotated): q, k and v read as
// their projections wrote them, [B, T, H·D] and [B, T, Hk·D], rotary embeddings applied on those
// rows, the gradients written there.
void packProjections(graph::CausalAttentionOp attention, OpBuilder& b) {
  std::optional<Projection> q = projectionOf(attention.getQ()), k = projectionOf(attention.getK()),
                            v = projectionOf(attention.getV());
  if (!q || !k || !v) return;
  std::array<Projection, 3> forward{*q, *k, *v};
  std::optional<SmallVector<ProjectionsBackward>> backward = gradientsOf<ProjectionsBackward>(
      attention,
      [&](graph::CausalAttentionGradOp grad) { return projectionsBackwardOf(grad, forward); });
  SmallVector<Operation*> dead{attention};
  Value merged = backward ? mergedOutput(attention, dead) : nullptr;
  if (!merged) return;
  const auto isGrad = [](Operation* op) { return isa<graph::CausalAttentionGradOp>(op); };
  // A rotated operand read elsewhere keeps its heads; so would the program, so it stays apart.
  for (Projection& p : forward)
    if (p.rotary)
      for (Operation* user : p.rotary->getUsers())
        if (user != attention && !isGrad(user)) return;

  const int64_t heads = shapeOf(attention.getQ())[1];
  const float scale = attention.getScale().convertToFloat();
  b.setInsertionPoint(attention);
  std::array<Value, 3> rows;
  for (size_t part = 0; part < 3; ++part) {
    Projection& p = forward[part];
    rows[part] = p.rotary ? rotatedRows(b, p.rotary, p.rows, shapeOf(p.heads.getResult()), "rotary")
                          : p.rows;
  }
  plan::KernelOp forwardStep =
      call(b, attention.getLoc(), "causal_attention_qkv",
           {merged.getType(), attention.getLse().getType()}, ArrayRef<Value>(rows), scale, heads);
  inheritMarks(attention, forwardStep);
  merged.replaceAllUsesWith(forwardStep->getResult(0));
  for (ProjectionsBackward& g : *backward) {
    // After the last of what it reads: dout's rows, and the forward's.
    b.setInsertionPoint(g.grad);
    SmallVector<Value> operands{
        g.dout, rows[0], rows[1], rows[2], forwardStep->getResult(0), forwardStep->getResult(1)};
    SmallVector<Type> types;
    for (Value m : g.merged) types.push_back(m.getType());
    plan::KernelOp gradStep =
        call(b, g.grad.getLoc(), "causal_attention_qkv_grad", types, operands, scale, heads);
    inheritMarks(g.grad, gradStep);
    for (int part = 0; part < 3; ++part) {
      Value d = gradStep->getResult(part);
      if (g.rotary[part])
        d = rotatedRows(b, g.rotary[part], d, shapeOf(forward[part].heads.getResult()),
                        "rotary_grad");
      g.merged[part].replaceAllUsesWith(d);
    }
    dead.push_back(g.grad);
    dead.append(g.ops);
  }
  attention.getLse().replaceAllUsesWith(forwardStep->getResult(1));
  for (Projection& p : forward) dead.append(p.ops);
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
