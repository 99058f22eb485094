// dtc-lower-to-kernels: graph and dist ops become plan.kernel calls, the GEMM epilogues fused on
// the way (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "Passes.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "lowering/EpilogueFusion.h"
#include "lowering/LossFusion.h"
#include "lowering/MultiTensorFusion.h"
#include "lowering/PackedAttention.h"
#include "lowering/ResidualNormFusion.h"
#include "ops/kernel_registry.h"
#include "plan/IR/PlanOps.h"

namespace dtc {
#define GEN_PASS_DEF_LOWERTOKERNELS
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// A compiler mark is namespaced by its dialect ("dist.stage"); a kernel parameter is not.
bool isMark(NamedAttribute attr) { return attr.getName().getValue().contains('.'); }

// The function's `rng` setting, int64 [2] = (seed, step), which the runtime writes before each
// step: added as its last argument the first time a step draws random numbers.
Value rngArgument(func::FuncOp func, Value& rng) {
  if (rng) return rng;
  Builder b(func.getContext());
  const unsigned index = func.getNumArguments();
  auto type = RankedTensorType::get({2}, b.getI64Type());
  auto attrs = b.getDictionaryAttr(b.getNamedAttr(attr::kHyper, b.getStringAttr("rng")));
  if (failed(func.insertArgument(index, type, attrs, func.getLoc()))) return {};
  return rng = func.getArgument(index);
}

// The most elements a tensor of a plan may have (the runtime's plan verifier holds plans to it):
// checked on what each rank holds, after partitioning, where the model's whole-batch values
// (bounded only to keep byte counts in 64 bits) have been cut down or fused away.
constexpr int64_t kPlanMaxElements = int64_t(1) << 40;

LogicalResult withinPlanBound(Value v, Location loc) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape()) return success();
  int64_t n = 1;
  for (int64_t d : type.getShape())
    if (d > 0 && n > kPlanMaxElements / d)
      return emitError(loc) << "each rank would hold a tensor of " << type
                            << ", more than 2^40 elements: split it over more devices or "
                               "micro-batches"
                            << (isa_and_nonnull<graph::BatchMatmulOp>(v.getDefiningOp())
                                    ? " (or fuse attention, --fused-attention)"
                                    : "");
    else
      n *= std::max<int64_t>(d, 1);
  return success();
}

LogicalResult lower(Operation* op, OpBuilder& b, Value& rng) {
  const KernelInfo* kernel = findKernel(op->getName().stripDialect().str());
  if (!kernel) return op->emitOpError("has no runtime kernel (runtime/ops/kernels.def) to run it");
  SmallVector<NamedAttribute> params, marks;
  for (NamedAttribute attr : op->getAttrs()) (isMark(attr) ? marks : params).push_back(attr);
  SmallVector<Value> operands(op->getOperands());
  if (isa<graph::DropoutOp>(op)) {
    Value setting = rngArgument(op->getParentOfType<func::FuncOp>(), rng);
    if (!setting) return op->emitOpError("cannot add the function's rng argument");
    operands.push_back(setting);
  }
  b.setInsertionPoint(op);
  auto call = plan::KernelOp::create(b, op->getLoc(), op->getResultTypes(), operands,
                                     b.getStringAttr(kernel->name), b.getDictionaryAttr(params));
  for (NamedAttribute mark : marks) call->setAttr(mark.getName(), mark.getValue());
  op->replaceAllUsesWith(call->getResults());
  op->erase();
  return success();
}

struct LowerToKernelsPass : impl::LowerToKernelsBase<LowerToKernelsPass> {
  using LowerToKernelsBase::LowerToKernelsBase;

  void runOnOperation() override {
    OpBuilder b(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      for (BlockArgument arg : func.getArguments())
        if (failed(withinPlanBound(arg, func.getLoc()))) return signalPassFailure();
      WalkResult bounded = func.walk([](Operation* op) {
        for (Value r : op->getResults())
          if (failed(withinPlanBound(r, op->getLoc()))) return WalkResult::interrupt();
        return WalkResult::advance();
      });
      if (bounded.wasInterrupted()) return signalPassFailure();
      if (packedAttention) packAttention(func);
      if (epilogues) {
        fuseEpilogues(func, absorbCasts);
        fuseCrossEntropy(func);
        fuseResidualNorms(func, absorbCasts);
      }
      SmallVector<Operation*> ops;
      for (Operation& op : func.getBody().front().without_terminator())
        if (!isa<plan::KernelOp>(op)) ops.push_back(&op);
      Value rng;
      for (Operation* op : ops)
        if (failed(lower(op, b, rng))) return signalPassFailure();
      if (multiTensor) {
        fuseOptimizerUpdates(func);
        fuseParameterCasts(func);
      }
    }
  }
};

}  // namespace
}  // namespace dtc
