// dtc-mixed-precision: contractions in bf16/f16 around f32 everything else (see Passes.td).
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "Passes.h"
#include "graph/IR/GraphOps.h"
#include "planfile/function_names.h"

namespace dtc {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

struct MixedPrecisionPass : impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext* ctx = module.getContext();
    Type low;
    if (precision == "bf16")
      low = BFloat16Type::get(ctx);
    else if (precision == "fp16")
      low = Float16Type::get(ctx);
    else if (precision == "fp32")
      return;
    else {
      module.emitError("unknown precision '") << precision << "' (expected fp32, bf16 or fp16)";
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>(fn::kForward);
    if (!forward) {
      module.emitError("dtc-mixed-precision: the module has no @forward function");
      return signalPassFailure();
    }
    SmallVector<Operation*> contractions;
    forward.walk([&](Operation* op) {
      // Fused attention is two contractions around a softmax its kernels keep in f32 (lse too).
      if (isa<graph::MatmulOp, graph::LinearOp, graph::BatchMatmulOp, graph::CausalAttentionOp>(op))
        contractions.push_back(op);
    });
    OpBuilder b(ctx);
    for (Operation* op : contractions) {
      b.setInsertionPoint(op);
      for (OpOperand& operand : op->getOpOperands()) {
        auto type = cast<RankedTensorType>(operand.get().getType());
        operand.set(graph::CastOp::create(b, op->getLoc(), type.clone(low), operand.get()));
      }
      Value result = op->getResult(0);
      auto type = cast<RankedTensorType>(result.getType());
      result.setType(type.clone(low));
      b.setInsertionPointAfter(op);
      auto back = graph::CastOp::create(b, op->getLoc(), type, result);
      result.replaceAllUsesExcept(back.getResult(), back);
    }
    module->setAttr(attr::kPrecision, b.getStringAttr(precision));
  }
};

}  // namespace
}  // namespace dtc
