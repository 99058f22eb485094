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
#include "sharding/ContextAttention.h"

namespace dtc {
#define GEN_PASS_DEF_RINGATTENTION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

class Ring {
 public:
  Ring(Operation* op, ArrayAttr axes, int64_t devices)
      : b_(op), loc_(op->getLoc()), op_(op), axes_(axes), devices_(devices) {}

  // x from the device one place back along the ring.
  Value shift(Value x) {
    auto step = dist::RingShiftOp::create(b_, loc_, x.getType(), x, axes_, 1);
    sharding::copyAttributes(op_, step, false);
    return step;
  }

  Value convert(Value x, Type element) {
    auto type = mlir::cast<RankedTensorType>(x.getType());
    if (type.getElementType() == element) return x;
    auto c = graph::CastOp::create(b_, loc_, type.clone(element), x);
    sharding::copyAttributes(op_, c, false);
    return c;
  }

  // Gradients are summed in float32 whatever the attention's type.
  Value accumulate(Value sum, Value term) {
    term = convert(term, b_.getF32Type());
    if (!sum) return term;
    auto add = graph::AddOp::create(b_, loc_, sum, term);
    sharding::copyAttributes(op_, add, false);
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
        sharding::copyAttributes(op_, merge, false);
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

 private:
  // A block's attention: the replaced op's attributes, and which device's keys it holds.
  void place(Operation* op, Operation* block, int64_t step) {
    sharding::copyAttributes(op, block, true);
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
    const dist::MeshAttr mesh = dist::getMesh(module);
    for (Operation* op : sharding::splitAttention(module)) {
      FailureOr<sharding::SplitAttention> a = sharding::readSplitAttention(op, "ring attention");
      if (failed(a)) return signalPassFailure();
      Ring ring(op, a->axes, mesh.groupSize(a->axes));
      if (auto forward = dyn_cast<graph::CausalAttentionOp>(op)) {
        auto [out, lse] = ring.forward(forward, a->keys, a->values);
        sharding::replaceSplitAttention(*a, {out, lse});
        continue;
      }
      auto grad = cast<graph::CausalAttentionGradOp>(op);
      auto [dq, dk, dv] = ring.backward(grad, a->keys, a->values);
      // Home: each block's sums, in the gradients' type (what the reduce-scatter would send).
      Type element = getElementTypeOrSelf(grad.getDk().getType());
      dk = ring.shift(ring.convert(dk, element));
      dv = ring.shift(ring.convert(dv, element));
      dq = ring.convert(dq, getElementTypeOrSelf(grad.getDq().getType()));
      sharding::replaceSplitAttention(*a, {dq, dk, dv});
    }
  }
};

}  // namespace
}  // namespace dtc
