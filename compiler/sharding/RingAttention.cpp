// dtc-ring-attention: context parallelism's attention as a ring (see Passes.td).
//
// dtc-partition leaves each attention whose queries are split over cp reading keys and values
// gathered over cp, and its key and value gradients reduce-scattered back. A ring reaches the
// same keys one block at a time: the device's own block first, then each block passed one place
// along the ring while the current one is attended to, the partial results merged by their
// log-sum-exps. The backward passes the blocks around again, the gradients of each block's keys
// and values travelling with it, summed by every device it visits; one more step brings each
// block's sums home. A device then holds two blocks of keys and values (this one and the next)
// instead of the whole sequence, and the transfers overlap the attention.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_RINGATTENTION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// The block of keys or values that `v`, gathered over `axes` along the sequence, reassembles.
Value gatheredBlock(Value v, ArrayAttr axes) {
  auto gather = v.getDefiningOp<dist::AllGatherOp>();
  if (!gather || gather.getAxes() != axes ||
      static_cast<int64_t>(gather.getDim()) != cast<RankedTensorType>(v.getType()).getRank() - 2)
    return {};
  return gather.getX();
}

// What the new ops take from the one they replace: its marks (pipeline unit, backward,
// recomputed) and, on attention, its attributes; not its result shardings, which were the
// partitioner's.
void copyAttributes(Operation* from, Operation* to, bool all) {
  for (NamedAttribute attr : from->getDiscardableAttrs())
    if (attr.getName() != dist::kShardingsAttr && (all || attr.getName().getValue().contains('.')))
      to->setAttr(attr.getName(), attr.getValue());
}

class Ring {
 public:
  Ring(Operation* op, ArrayAttr axes, int64_t devices)
      : b_(op), loc_(op->getLoc()), op_(op), axes_(axes), devices_(devices) {}

  // x from the device one place back along the ring.
  Value shift(Value x) {
    auto step = dist::RingShiftOp::create(b_, loc_, x.getType(), x, axes_, 1);
    copyAttributes(op_, step, false);
    return step;
  }

  Value convert(Value x, Type element) {
    auto type = mlir::cast<RankedTensorType>(x.getType());
    if (type.getElementType() == element) return x;
    auto c = graph::CastOp::create(b_, loc_, type.clone(element), x);
    copyAttributes(op_, c, false);
    return c;
  }

  // Gradients are summed in float32 whatever the attention's type.
  Value accumulate(Value sum, Value term) {
    term = convert(term, b_.getF32Type());
    if (!sum) return term;
    auto add = graph::AddOp::create(b_, loc_, sum, term);
    copyAttributes(op_, add, false);
    return add;
  }

  // The forward: out and lse over every block.
  std::pair<Value, Value> forward(graph::CausalAttentionOp op, Value k, Value v) {
    Value out, lse;
    for (int64_t s = 0; s < devices_; ++s) {
      // The next block is on its way while this one is attended to.
      Value kNext = s + 1 < devices_ ? shift(k) : Value(),
            vNext = s + 1 < devices_ ? shift(v) : Value();
      auto block = graph::CausalAttentionOp::create(b_, loc_, op.getQ(), k, v, op.getScaleAttr());
      place(op, block, s);
      if (!out) {
        out = block.getOut();
        lse = block.getLse();
      } else {
        auto merge =
            graph::AttentionMergeOp::create(b_, loc_, out, lse, block.getOut(), block.getLse());
        copyAttributes(op_, merge, false);
        out = merge.getOut();
        lse = merge.getLse();
      }
      k = kNext;
      v = vNext;
    }
    return {out, lse};
  }

  // The backward: dq (float32), and this device's block of dk and dv summed over every device's
  // queries (float32).
  std::tuple<Value, Value, Value> backward(graph::CausalAttentionGradOp op, Value k, Value v) {
    Value dq, dk, dv;
    for (int64_t s = 0; s < devices_; ++s) {
      Value kNext = s + 1 < devices_ ? shift(k) : Value(),
            vNext = s + 1 < devices_ ? shift(v) : Value();
      // The sums of the block now here, from the devices it has visited.
      if (dk) {
        dk = shift(dk);
        dv = shift(dv);
      }
      auto block = graph::CausalAttentionGradOp::create(
          b_, loc_, op.getDout(), op.getQ(), k, v, op.getOut(), op.getLse(), op.getScaleAttr());
      place(op, block, s);
      dq = accumulate(dq, block.getDq());
      dk = accumulate(dk, block.getDk());
      dv = accumulate(dv, block.getDv());
      k = kNext;
      v = vNext;
    }
    return {dq, dk, dv};
  }

  OpBuilder& builder() { return b_; }

 private:
  // A block's attention: the replaced op's attributes, and which device's keys it holds.
  void place(Operation* op, Operation* block, int64_t step) {
    copyAttributes(op, block, true);
    block->setAttr("kv_shift", b_.getI64IntegerAttr(step));
  }

  OpBuilder b_;
  Location loc_;
  Operation* op_;
  ArrayAttr axes_;
  int64_t devices_;
};

struct RingAttentionPass : impl::RingAttentionBase<RingAttentionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    mesh_ = dist::getMesh(module);
    SmallVector<Operation*> attention;
    module.walk([&](Operation* op) {
      if (isa<graph::CausalAttentionOp, graph::CausalAttentionGradOp>(op) &&
          op->hasAttr("seq_axes"))
        attention.push_back(op);
    });
    for (Operation* op : attention) {
      LogicalResult rewritten = isa<graph::CausalAttentionOp>(op)
                                    ? rewrite(cast<graph::CausalAttentionOp>(op))
                                    : rewrite(cast<graph::CausalAttentionGradOp>(op));
      if (failed(rewritten)) return signalPassFailure();
    }
  }

  // The blocks of keys and values, or an error naming what the partitioner left instead.
  FailureOr<std::pair<Value, Value>> blocks(Operation* op, Value k, Value v, ArrayAttr axes) {
    Value kBlock = gatheredBlock(k, axes), vBlock = gatheredBlock(v, axes);
    if (!kBlock || !vBlock)
      return op->emitOpError("ring attention needs its keys and values gathered over ")
             << axes << " along the sequence";
    return std::make_pair(kBlock, vBlock);
  }

  static void eraseIfDead(Value gathered) {
    if (Operation* gather = gathered.getDefiningOp(); gather && gather->use_empty())
      gather->erase();
  }

  LogicalResult rewrite(graph::CausalAttentionOp op) {
    auto axes = op->getAttrOfType<ArrayAttr>("seq_axes");
    FailureOr<std::pair<Value, Value>> kv = blocks(op, op.getK(), op.getV(), axes);
    if (failed(kv)) return failure();
    Ring ring(op, axes, mesh_.groupSize(axes));
    auto [out, lse] = ring.forward(op, kv->first, kv->second);
    Value k = op.getK(), v = op.getV();
    op.getOut().replaceAllUsesWith(out);
    op.getLse().replaceAllUsesWith(lse);
    op->erase();
    eraseIfDead(k);
    eraseIfDead(v);
    return success();
  }

  // The key and value gradients are whole-sequence partial sums; the partitioner reduce-scatters
  // them over the axes, which the ring's last step does.
  FailureOr<SmallVector<dist::ReduceScatterOp>> scatters(Operation* op, Value grad,
                                                         ArrayAttr axes) {
    SmallVector<dist::ReduceScatterOp> found;
    for (Operation* user : grad.getUsers()) {
      auto scatter = dyn_cast<dist::ReduceScatterOp>(user);
      if (!scatter || scatter.getAxes() != axes ||
          static_cast<int64_t>(scatter.getDim()) !=
              cast<RankedTensorType>(grad.getType()).getRank() - 2)
        return op->emitOpError(
                   "ring attention needs its key and value gradients reduce-scattered "
                   "over ")
               << axes << " along the sequence, found " << user->getName();
      found.push_back(scatter);
    }
    return found;
  }

  LogicalResult rewrite(graph::CausalAttentionGradOp op) {
    auto axes = op->getAttrOfType<ArrayAttr>("seq_axes");
    FailureOr<std::pair<Value, Value>> kv = blocks(op, op.getK(), op.getV(), axes);
    if (failed(kv)) return failure();
    FailureOr<SmallVector<dist::ReduceScatterOp>> dkScatters = scatters(op, op.getDk(), axes);
    FailureOr<SmallVector<dist::ReduceScatterOp>> dvScatters = scatters(op, op.getDv(), axes);
    if (failed(dkScatters) || failed(dvScatters)) return failure();
    Ring ring(op, axes, mesh_.groupSize(axes));
    auto [dq, dk, dv] = ring.backward(op, kv->first, kv->second);
    // Home: each block's sums, in the gradients' type (what the reduce-scatter would send).
    Type element = getElementTypeOrSelf(op.getDk().getType());
    dk = ring.shift(ring.convert(dk, element));
    dv = ring.shift(ring.convert(dv, element));
    op.getDq().replaceAllUsesWith(ring.convert(dq, getElementTypeOrSelf(op.getDq().getType())));
    for (auto [list, sum] : {std::make_pair(&*dkScatters, dk), std::make_pair(&*dvScatters, dv)})
      for (dist::ReduceScatterOp scatter : *list) {
        scatter.getResult().replaceAllUsesWith(sum);
        scatter->erase();
      }
    Value k = op.getK(), v = op.getV();
    op->erase();
    eraseIfDead(k);
    eraseIfDead(v);
    return success();
  }

  dist::MeshAttr mesh_;
};

}  // namespace
}  // namespace dtc
