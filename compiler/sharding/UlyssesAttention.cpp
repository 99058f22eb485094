// dtc-ulysses-attention: context parallelism's attention by all-to-all (see Passes.td).
//
// DeepSpeed-Ulysses' exchange: attention needs every position of a head but no other head, so
// an all-to-all over cp turns the queries, keys and values from [..., H, T/cp, D] (every head, a
// block of the sequence) into [..., H/cp, T, D] (a cp-th of the heads, the whole sequence), the
// attention runs on whole sequences as on one device (the load-balanced order kept: the mask
// still reads `seq_chunks`), and one more all-to-all turns its output back. The backward reuses
// the head-split operands the forward made, sends only the incoming gradient across, and sends
// its three gradients back; the key and value gradients are then whole sums, so the exchange
// replaces their reduce-scatters. Bytes per layer are a fraction of the ring's and independent
// of cp's size; the heads (per tensor-parallel rank) must divide over cp.
#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "sharding/ContextAttention.h"

namespace dtc {
#define GEN_PASS_DEF_ULYSSESATTENTION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

constexpr StringLiteral kMethod = "ulysses attention (--cp-attention ulysses)";

struct UlyssesAttentionPass : impl::UlyssesAttentionBase<UlyssesAttentionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    mesh_ = dist::getMesh(module);
    for (auto func : module.getOps<func::FuncOp>()) {
      headSplit_.clear();
      for (Operation* op : sharding::splitAttention(func)) {
        LogicalResult rewritten = isa<graph::CausalAttentionOp>(op)
                                      ? rewrite(cast<graph::CausalAttentionOp>(op))
                                      : rewrite(cast<graph::CausalAttentionGradOp>(op));
        if (failed(rewritten)) return signalPassFailure();
      }
    }
  }

  // x [..., H, T/n, D] (or lse [..., H, T/n], whose dimensions `heads` and `sequence` are the
  // same counted from the front) as [..., H/n, T, D]: its heads dealt out over the
  // group, its blocks of the sequence gathered in group order. Made once per value: the backward
  // reads what the forward made.
  Value toHeads(OpBuilder& b, Operation* at, Value x, int64_t heads, int64_t sequence) {
    if (Value done = headSplit_.lookup(x)) return done;
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[heads] /= devices_;
    shape[sequence] *= devices_;
    auto exchange =
        dist::AllToAllOp::create(b, at->getLoc(), type.clone(shape), x, axes_, heads, sequence);
    sharding::copyAttributes(at, exchange, false);
    headSplit_[x] = exchange;
    return exchange;
  }

  // The inverse: y [..., H/n, T, D] back to [..., H, T/n, D].
  Value toSequence(OpBuilder& b, Operation* at, Value y, int64_t heads, int64_t sequence) {
    auto type = cast<RankedTensorType>(y.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[heads] *= devices_;
    shape[sequence] /= devices_;
    auto exchange =
        dist::AllToAllOp::create(b, at->getLoc(), type.clone(shape), y, axes_, sequence, heads);
    sharding::copyAttributes(at, exchange, false);
    return exchange;
  }

  // The group and the heads' dimension of q [..., H, T, D]; an error naming the sizes when the
  // heads do not divide over it.
  LogicalResult prepare(Operation* op, Value q) {
    axes_ = op->getAttrOfType<ArrayAttr>("seq_axes");
    devices_ = mesh_.groupSize(axes_);
    auto type = cast<RankedTensorType>(q.getType());
    if (type.getRank() < 3)
      return op->emitOpError() << kMethod << " needs heads: q [..., H, T, D], got " << type;
    const int64_t heads = type.getDimSize(type.getRank() - 3);
    if (heads % devices_ != 0)
      return op->emitOpError() << kMethod << ": " << heads
                               << " attention heads (per tensor-parallel rank) do not divide over "
                               << devices_ << " devices of " << axes_;
    return success();
  }

  // A whole-sequence attention in place of `op`: its attributes but the queries' split.
  void place(Operation* op, Operation* whole) {
    sharding::copyAttributes(op, whole, true);
    whole->removeAttr("seq_axes");
  }

  LogicalResult rewrite(graph::CausalAttentionOp op) {
    if (failed(prepare(op, op.getQ()))) return failure();
    FailureOr<sharding::SplitAttention> a = sharding::readSplitAttention(op, kMethod);
    if (failed(a)) return failure();
    const int64_t rank = cast<RankedTensorType>(op.getQ().getType()).getRank();
    const int64_t h = rank - 3, t = rank - 2;
    OpBuilder b(op);
    Value q = toHeads(b, op, op.getQ(), h, t), k = toHeads(b, op, a->keys, h, t),
          v = toHeads(b, op, a->values, h, t);
    auto whole = graph::CausalAttentionOp::create(b, op.getLoc(), q, k, v, op.getScaleAttr());
    place(op, whole);
    Value out = toSequence(b, op, whole.getOut(), h, t);
    Value lse = toSequence(b, op, whole.getLse(), h, t);
    headSplit_[out] = whole.getOut();
    headSplit_[lse] = whole.getLse();
    sharding::replaceSplitAttention(*a, {out, lse});
    return success();
  }

  LogicalResult rewrite(graph::CausalAttentionGradOp op) {
    if (failed(prepare(op, op.getQ()))) return failure();
    FailureOr<sharding::SplitAttention> a = sharding::readSplitAttention(op, kMethod);
    if (failed(a)) return failure();
    const int64_t rank = cast<RankedTensorType>(op.getQ().getType()).getRank();
    const int64_t h = rank - 3, t = rank - 2;
    OpBuilder b(op);
    Value dout = toHeads(b, op, op.getDout(), h, t), q = toHeads(b, op, op.getQ(), h, t),
          k = toHeads(b, op, a->keys, h, t), v = toHeads(b, op, a->values, h, t),
          out = toHeads(b, op, op.getOut(), h, t), lse = toHeads(b, op, op.getLse(), h, t);
    auto whole = graph::CausalAttentionGradOp::create(b, op.getLoc(), dout, q, k, v, out, lse,
                                                      op.getScaleAttr());
    place(op, whole);
    sharding::replaceSplitAttention(
        *a, {toSequence(b, op, whole.getDq(), h, t), toSequence(b, op, whole.getDk(), h, t),
             toSequence(b, op, whole.getDv(), h, t)});
    return success();
  }

  dist::MeshAttr mesh_;
  ArrayAttr axes_;
  int64_t devices_ = 1;
  DenseMap<Value, Value> headSplit_;  // a value split along the sequence -> split by heads
};

}  // namespace
}  // namespace dtc
