// dtc-merge-collectives: identical collectives in a block become one (see Passes.td).
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/Pass.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"

namespace dtc {
#define GEN_PASS_DEF_MERGECOLLECTIVES
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct MergeCollectivesPass : public impl::MergeCollectivesBase<MergeCollectivesPass> {
  void runOnOperation() override {
    getOperation().walk([&](Block* block) {
      // The collectives seen so far in the block, by their first operand.
      DenseMap<Value, SmallVector<Operation*, 2>> byOperand;
      for (Operation& op : llvm::make_early_inc_range(*block)) {
        if (!isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp, dist::AllToAllOp,
                 dist::LocalSliceOp>(op) ||
            op.getNumOperands() == 0)
          continue;
        SmallVector<Operation*, 2>& seen = byOperand[op.getOperand(0)];
        Operation* first = nullptr;
        for (Operation* earlier : seen)
          if (OperationEquivalence::isEquivalentTo(earlier, &op,
                                                   OperationEquivalence::IgnoreLocations)) {
            first = earlier;
            break;
          }
        if (!first) {
          seen.push_back(&op);
          continue;
        }
        op.replaceAllUsesWith(first->getResults());
        op.erase();
      }
    });
  }
};

}  // namespace
}  // namespace dtc
