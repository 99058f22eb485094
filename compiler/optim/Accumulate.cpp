// dtc-accumulate: K micro-batches per step (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"

#include "Passes.h"
#include "dist/IR/DistOps.h"
#include "flatbuffers/ModelImporter.h"
#include "graph/IR/GraphOps.h"

namespace dtc {
#define GEN_PASS_DEF_ACCUMULATE
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// A mean's divisor on K micro-batches: K times its own (or already pinned) count.
void scaleCount(Operation* op, int64_t k) {
  if (std::optional<int64_t> count = graph::meanCount(op))
    op->setAttr("count", Builder(op->getContext()).getI64IntegerAttr(*count * k));
}

struct AccumulatePass : public impl::AccumulateBase<AccumulatePass> {
  using AccumulateBase::AccumulateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (microBatches < 1) {
      module.emitError("gradient accumulation needs at least 1 micro-batch, got ")
          << static_cast<int64_t>(microBatches);
      return signalPassFailure();
    }
    if (microBatches == 1) return;
    auto grad = module.lookupSymbol<func::FuncOp>("grad");
    if (!grad) {
      module.emitError("dtc-accumulate: the module has no @grad function (run dtc-autodiff first)");
      return signalPassFailure();
    }
    const int64_t k = microBatches;
    // A pipeline schedules ops by micro-batch; other plans' IR stays free of the mark.
    const bool pipelined = module->hasAttr(dist::kPipelineAttr);
    OpBuilder b(grad);
    Builder& builder = b;

    // Arguments: each data input once per micro-batch, in place.
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    SmallVector<SmallVector<unsigned>> newIndex(grad.getNumArguments());
    llvm::StringMap<unsigned> paramArg;
    for (BlockArgument arg : grad.getArguments()) {
      unsigned i = arg.getArgNumber();
      bool data = grad.getArgAttr(i, attr::kData) != nullptr;
      if (auto p = grad.getArgAttrOfType<StringAttr>(i, attr::kParam)) paramArg[p.getValue()] = i;
      for (int64_t m = 0; m < (data ? k : 1); ++m) {
        newIndex[i].push_back(argTypes.size());
        argTypes.push_back(arg.getType());
        NamedAttrList attrs(grad.getArgAttrDict(i));
        if (data) attrs.set(attr::kMicroBatch, builder.getI64IntegerAttr(m));
        argAttrs.push_back(attrs.getDictionary(module.getContext()));
      }
    }
    auto ret = cast<func::ReturnOp>(grad.getBody().front().getTerminator());
    // Result r of the forward pass that updates parameter argument (BatchNorm statistics).
    DenseMap<unsigned, unsigned> updatesArg;
    SmallVector<bool> summed(ret.getNumOperands(), false);
    // @grad returns the loss first (dtc-autodiff), then gradients, then buffer updates.
    for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
      summed[r] = r == 0 || grad.getResultAttr(r, attr::kGradOf) != nullptr;
      if (auto upd = grad.getResultAttrOfType<StringAttr>(r, attr::kUpdates))
        if (auto it = paramArg.find(upd.getValue()); it != paramArg.end()) updatesArg[r] = it->second;
    }

    auto func = func::FuncOp::create(b, grad.getLoc(), "grad",
                                     b.getFunctionType(argTypes, grad.getResultTypes()));
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(grad.getAllResultAttrs());
    Block* body = func.addEntryBlock();
    b.setInsertionPointToStart(body);

    SmallVector<Value> results(ret.getNumOperands());
    DenseMap<unsigned, Value> carried;  // parameter argument -> its value after the last micro-batch
    for (int64_t m = 0; m < k; ++m) {
      IRMapping map;
      for (BlockArgument arg : grad.getArguments()) {
        unsigned i = arg.getArgNumber();
        Value v = body->getArgument(newIndex[i][newIndex[i].size() == 1 ? 0 : m]);
        if (auto it = carried.find(i); it != carried.end()) v = it->second;
        map.map(arg, v);
      }
      for (Operation& op : grad.getBody().front().without_terminator()) {
        Operation* clone = b.clone(op, map);
        scaleCount(clone, k);
        if (pipelined) clone->setAttr(dist::kMicroBatchAttr, builder.getI64IntegerAttr(m));
      }
      for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
        Value v = map.lookup(ret.getOperand(r));
        if (summed[r] && results[r])
          results[r] = graph::AddOp::create(b, v.getLoc(), results[r], v);
        else
          results[r] = v;  // sums start here; everything else is the last micro-batch's
        if (auto it = updatesArg.find(r); it != updatesArg.end()) carried[it->second] = v;
      }
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    grad.erase();
    module->setAttr(attr::kMicroBatches, builder.getI64IntegerAttr(k));
  }
};

}  // namespace
}  // namespace dtc
