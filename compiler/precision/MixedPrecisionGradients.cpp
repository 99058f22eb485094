// dtc-mixed-precision-gradients: mixed precision's choices for what backward stores (see
// Passes.td).
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "Passes.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

namespace dtc {
#define GEN_PASS_DEF_MIXEDPRECISIONGRADIENTS
#include "Passes.h.inc"
}  // namespace dtc

using namespace mlir;

namespace dtc {
namespace {

// The widening casts whose f32 results make up a parameter's gradient: a gradient @grad returns
// is such a cast, or a sum of them and others (a tied weight's two uses).
SmallVector<graph::CastOp> gradientCasts(func::FuncOp function) {
  SmallVector<graph::CastOp> casts;
  if (function.getBody().empty()) return casts;
  auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  llvm::SetVector<Value> sums;
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (function.getResultAttr(i, attr::kGradOf)) sums.insert(v);
  for (size_t i = 0; i < sums.size(); ++i) {
    Value v = sums[i];
    if (auto add = v.getDefiningOp<graph::AddOp>()) {
      sums.insert(add.getLhs());
      sums.insert(add.getRhs());
    } else if (auto widen = v.getDefiningOp<graph::CastOp>();
               widen && graph::is16BitFloat(graph::elementOf(widen.getX())) &&
               graph::elementOf(widen.getY()).isF32()) {
      casts.push_back(widen);
    }
  }
  return casts;
}

// A weight-gradient contraction (16-bit operands) read only by the cast widening it writes f32
// itself: its f32 sum unrounded.
void widenProduct(graph::CastOp widen) {
  Operation* product = widen.getX().getDefiningOp();
  if (!isa_and_nonnull<graph::LinearGradWeightOp, graph::MatmulOp>(product) ||
      !widen.getX().hasOneUse())
    return;
  widen.getX().setType(widen.getY().getType());
  widen.getY().replaceAllUsesWith(widen.getX());
  widen.erase();
}

struct MixedPrecisionGradientsPass
    : impl::MixedPrecisionGradientsBase<MixedPrecisionGradientsPass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      for (graph::CastOp widen : gradientCasts(function)) widenProduct(widen);
  }
};

}  // namespace
}  // namespace dtc
