// Multi-tensor updates and casts as patterns of the lowering onto kernels (see
// lowering/MultiTensorFusion.h).
#include "lowering/MultiTensorFusion.h"

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

// Casts of the same element types and marks may share one call.
using CastKey = std::tuple<const void*, const void*, const void*>;

CastKey castKeyOf(plan::KernelOp op) {
  auto element = [](Value v) { return cast<TensorType>(v.getType()).getElementType(); };
  return {element(op->getOperand(0)).getAsOpaquePointer(),
          element(op->getResult(0)).getAsOpaquePointer(),
          op->getDiscardableAttrDictionary().getAsOpaquePointer()};
}

}  // namespace

void fuseParameterCasts(func::FuncOp function) {
  if (function.getBody().empty()) return;
  std::map<CastKey, SmallVector<plan::KernelOp>> groups;
  SmallVector<CastKey> order;
  for (Operation& op : function.getBody().front()) {
    auto cast = dyn_cast<plan::KernelOp>(&op);
    if (!cast || cast.getKernel() != "cast" || cast->getNumOperands() != 1 ||
        !isa<BlockArgument>(cast->getOperand(0)))
      continue;
    auto& group = groups[castKeyOf(cast)];
    if (group.empty()) order.push_back(castKeyOf(cast));
    group.push_back(cast);
  }
  OpBuilder b(function.getContext());
  for (const CastKey& key : order) {
    SmallVector<plan::KernelOp>& casts = groups[key];
    if (casts.size() < 2) continue;
    SmallVector<Value> operands;
    SmallVector<Type> results;
    SmallVector<Location> locs;
    for (plan::KernelOp cast : casts) {
      operands.push_back(cast->getOperand(0));
      results.push_back(cast->getResult(0).getType());
      locs.push_back(cast.getLoc());
    }
    b.setInsertionPoint(casts.front());
    auto fused =
        plan::KernelOp::create(b, FusedLoc::get(b.getContext(), locs), results, operands,
                               b.getStringAttr("multi_tensor_cast"), b.getDictionaryAttr({}));
    inheritMarks(casts.front(), fused);
    for (auto [k, cast] : llvm::enumerate(casts)) {
      cast->getResult(0).replaceAllUsesWith(fused->getResult(k));
      cast->erase();
    }
  }
}

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
