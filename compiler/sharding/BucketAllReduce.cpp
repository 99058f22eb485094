// dtc-bucket-all-reduce: DDP-style gradient buckets (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_BUCKETALLREDUCE
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

int64_t bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getNumElements() * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

struct BucketAllReducePass : public impl::BucketAllReduceBase<BucketAllReducePass> {
  using BucketAllReduceBase::BucketAllReduceBase;

  void runOnOperation() override {
    if (bucketMb < 0) {
      getOperation().emitError("bucket size must be >= 0 MiB, got ")
          << static_cast<double>(bucketMb);
      return signalPassFailure();
    }
    const int64_t limit = static_cast<int64_t>(bucketMb * 1024 * 1024);
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      foldOverflowCounts(func);
      SmallVector<dist::AllReduceOp> bucket;
      int64_t bytes = 0;
      auto flush = [&] {
        if (bucket.size() > 1) fuse(bucket);
        bucket.clear();
        bytes = 0;
      };
      SmallVector<dist::AllReduceOp> all;
      func.walk([&](dist::AllReduceOp op) {
        if (op.getInputs().size() == 1 && op.getReduction() == "sum") all.push_back(op);
      });
      for (dist::AllReduceOp op : all) {
        int64_t size = bytesOf(op.getInputs()[0]);
        bool fits = !bucket.empty() && bucket.front().getAxes() == op.getAxes() &&
                    bytes + size <= limit && canDelayTo(bucket, op);
        if (!bucket.empty() && !fits) flush();
        bucket.push_back(op);
        bytes += size;
      }
      flush();
    }
  }

  // Loss scaling sums every gradient's count of non-finite values, and a sharded gradient's
  // count is reduced over its group on its own (one tiny collective per tensor). The counts are
  // whole numbers, so summing the local counts first and reducing once is exact:
  // sum(reduce(c_i)) + sum(r_j) = reduce(sum(c_i)) + sum(r_j).
  static void foldOverflowCounts(func::FuncOp func) {
    SmallVector<graph::LossScaleStepOp> steps;
    func.walk([&](graph::LossScaleStepOp op) { steps.push_back(op); });
    for (graph::LossScaleStepOp step : steps) {
      SmallVector<graph::AddOp> adds;  // the sum's chain, last first
      SmallVector<Value> leaves;
      Value v = step.getNonfinite();
      while (auto add = v.getDefiningOp<graph::AddOp>()) {
        if (!add->hasOneUse()) break;
        adds.push_back(add);
        leaves.push_back(add.getRhs());
        v = add.getLhs();
      }
      leaves.push_back(v);
      SmallVector<dist::AllReduceOp> reduced;
      SmallVector<Value> local;
      for (Value leaf : llvm::reverse(leaves)) {
        auto ar = leaf.getDefiningOp<dist::AllReduceOp>();
        if (ar && ar->hasOneUse() && ar.getInputs().size() == 1 && ar.getReduction() == "sum" &&
            ar.getInputs()[0].getDefiningOp<graph::NonfiniteCountOp>() &&
            (reduced.empty() || reduced.front().getAxes() == ar.getAxes()))
          reduced.push_back(ar);
        else
          local.push_back(leaf);
      }
      if (reduced.size() < 2) continue;
      OpBuilder b(step);
      auto like = [](Operation* from, Operation* to) {
        for (NamedAttribute a : from->getDiscardableAttrs()) to->setAttr(a.getName(), a.getValue());
      };
      Value sum;
      for (dist::AllReduceOp ar : reduced) {
        Value count = ar.getInputs()[0];
        if (!sum) {
          sum = count;
          continue;
        }
        auto add = graph::AddOp::create(b, ar.getLoc(), sum, count);
        like(adds.front(), add);
        sum = add.getResult();
      }
      auto once = dist::AllReduceOp::create(b, reduced.front().getLoc(), TypeRange{sum.getType()},
                                            ValueRange{sum}, reduced.front().getAxes(), "sum");
      like(reduced.front(), once);
      Value total = once.getResults()[0];
      for (Value leaf : local) {
        auto add = graph::AddOp::create(b, step.getLoc(), total, leaf);
        like(adds.front(), add);
        total = add.getResult();
      }
      step.getNonfiniteMutable().assign(total);
      for (graph::AddOp add : adds) add.erase();
      for (dist::AllReduceOp ar : reduced) ar.erase();
    }
  }

  // Every member's results are first used after `last`, where the bucket will run.
  static bool canDelayTo(ArrayRef<dist::AllReduceOp> bucket, dist::AllReduceOp last) {
    for (dist::AllReduceOp op : bucket)
      for (Operation* user : op->getUsers())
        if (!last->isBeforeInBlock(user)) return false;
    return true;
  }

  static void fuse(ArrayRef<dist::AllReduceOp> bucket) {
    dist::AllReduceOp last = bucket.back();
    OpBuilder b(last);
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    for (dist::AllReduceOp op : bucket) {
      inputs.push_back(op.getInputs()[0]);
      types.push_back(op.getResults()[0].getType());
    }
    auto fused = dist::AllReduceOp::create(b, last.getLoc(), types, inputs, last.getAxes(), "sum");
    fused->setAttr("bucket_bytes", b.getI64IntegerAttr([&] {
      int64_t n = 0;
      for (Value v : inputs) n += bytesOf(v);
      return n;
    }()));
    for (auto [i, member] : llvm::enumerate(bucket)) {
      dist::AllReduceOp op = member;
      op.getResults()[0].replaceAllUsesWith(fused.getResults()[i]);
      op.erase();
    }
  }
};

}  // namespace
}  // namespace dtc
