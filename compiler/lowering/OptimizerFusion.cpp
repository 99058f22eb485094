// Multi-tensor optimizer updates as a pattern of the lowering onto kernels (see
// lowering/OptimizerFusion.h).
#include "lowering/OptimizerFusion.h"

#include <map>
#include <tuple>

#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/Builders.h"

#include "OpMarks.h"
#include "plan/IR/PlanOps.h"

using namespace mlir;

namespace dtc {
namespace {

constexpr int kUpdateInputs = 6;   // p, g, m, v, step, lr
constexpr int kUpdateOutputs = 3;  // p', m', v'

// Updates that may share one call: the same hyper-parameters, the same step counter and learning
// rate, and the same marks (a pipeline stage's programs keep their own updates).
using GroupKey = std::tuple<const void*, const void*, const void*, const void*>;

GroupKey keyOf(plan::KernelOp update) {
  return {update.getParams().getAsOpaquePointer(), update->getOperand(4).getAsOpaquePointer(),
          update->getOperand(5).getAsOpaquePointer(),
          update->getDiscardableAttrDictionary().getAsOpaquePointer()};
}

// A run of updates the fused call can replace: placed where the last one was, every member's
// results must be read only after it.
struct Batch {
  SmallVector<plan::KernelOp> updates;
  int64_t firstUse = INT64_MAX;  // the earliest position that reads a member's result
};

void emit(Batch& batch, OpBuilder& b) {
  if (batch.updates.size() < 2) return;
  plan::KernelOp last = batch.updates.back();
  SmallVector<Value> operands;
  SmallVector<Type> results;
  SmallVector<Location> locs;
  for (plan::KernelOp update : batch.updates) {
    for (int i = 0; i < 4; ++i) operands.push_back(update->getOperand(i));
    for (Type t : update->getResultTypes()) results.push_back(t);
    locs.push_back(update.getLoc());
  }
  operands.push_back(last->getOperand(4));
  operands.push_back(last->getOperand(5));
  b.setInsertionPoint(last);
  auto fused = plan::KernelOp::create(b, FusedLoc::get(b.getContext(), locs), results, operands,
                                      b.getStringAttr("multi_tensor_adamw"), last.getParams());
  inheritMarks(last, fused);
  for (auto [k, update] : llvm::enumerate(batch.updates)) {
    for (int r = 0; r < kUpdateOutputs; ++r)
      update->getResult(r).replaceAllUsesWith(fused->getResult(kUpdateOutputs * k + r));
    update->erase();
  }
}

}  // namespace

void fuseOptimizerUpdates(func::FuncOp function) {
  if (function.getBody().empty()) return;
  Block& body = function.getBody().front();
  llvm::DenseMap<Operation*, int64_t> position;
  int64_t n = 0;
  for (Operation& op : body) position[&op] = n++;

  std::map<GroupKey, Batch> open;
  SmallVector<Batch> done;
  OpBuilder b(function.getContext());
  for (Operation& op : body) {
    auto update = dyn_cast<plan::KernelOp>(&op);
    if (!update || update.getKernel() != "adamw_update" ||
        update->getNumOperands() != kUpdateInputs || update->getNumResults() != kUpdateOutputs)
      continue;
    Batch& batch = open[keyOf(update)];
    // A member's result read before this update would be read before the fused call: the batch
    // ends here and this update starts the next.
    if (batch.firstUse <= position[&op]) {
      done.push_back(std::move(batch));
      batch = Batch{};
    }
    batch.updates.push_back(update);
    for (Value r : update->getResults())
      for (Operation* user : r.getUsers())
        batch.firstUse = std::min(batch.firstUse, position[user]);
  }
  for (auto& [key, batch] : open) done.push_back(std::move(batch));
  for (Batch& batch : done) emit(batch, b);
}

}  // namespace dtc
