// Reverse-mode rules (GradientOpInterface) of the ops of GraphOps.td; each other family keeps
// its rules in its own file (GraphTransformerOps.cpp, GraphConvOps.cpp, ...).
#include "graph/IR/GraphOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace dtc::graph;

namespace {

using Grads = FailureOr<SmallVector<Value>>;

RankedTensorType tensorType(Value v) { return cast<RankedTensorType>(v.getType()); }

// Sums a broadcast result's gradient back to the shape of the operand that was broadcast:
// extra leading dimensions are summed away, dimensions of size 1 are summed keeping the 1.
Value sumToShape(OpBuilder& b, Location loc, Value grad, RankedTensorType target) {
  ArrayRef<int64_t> from = tensorType(grad).getShape();
  ArrayRef<int64_t> to = target.getShape();
  size_t lead = from.size() - to.size();
  if (lead > 0) {
    SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, lead));
    grad = ReduceSumOp::create(b, loc, grad, axes, /*keepdims=*/false);
  }
  SmallVector<int64_t> ones;
  for (auto [i, d] : llvm::enumerate(to))
    if (d == 1 && tensorType(grad).getShape()[i] != 1) ones.push_back(i);
  if (!ones.empty()) grad = ReduceSumOp::create(b, loc, grad, ones, /*keepdims=*/true);
  return grad;
}

Value negate(OpBuilder& b, Location loc, Value x) {
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  Value minusOne = FillOp::create(b, loc, scalar, b.getF32FloatAttr(-1.0f));
  return MulOp::create(b, loc, x, minusOne);
}

}  // namespace

Grads CastOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{CastOp::create(b, getLoc(), getX().getType(), dys[0])};
}

// d/dx x^p = p · x^(p−1).
Grads PowOp::buildGradients(OpBuilder& b, ValueRange dys) {
  const float p = getExponent().convertToFloat();
  Value lower = PowOp::create(b, getLoc(), getX(), b.getF32FloatAttr(p - 1.0f));
  Value slope = ScaleOp::create(b, getLoc(), lower, b.getF32FloatAttr(p));
  return SmallVector<Value>{MulOp::create(b, getLoc(), dys[0], slope)};
}

Grads GeluOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{
      GeluGradOp::create(b, getLoc(), dys[0], getX(), getApproximateTanhAttr())};
}

Grads AddOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{sumToShape(b, getLoc(), dys[0], tensorType(getLhs())),
                            sumToShape(b, getLoc(), dys[0], tensorType(getRhs()))};
}

Grads SubOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dRhs = negate(b, getLoc(), dys[0]);
  return SmallVector<Value>{sumToShape(b, getLoc(), dys[0], tensorType(getLhs())),
                            sumToShape(b, getLoc(), dRhs, tensorType(getRhs()))};
}

Grads MulOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dLhs = MulOp::create(b, getLoc(), dys[0], getRhs());
  Value dRhs = MulOp::create(b, getLoc(), dys[0], getLhs());
  return SmallVector<Value>{sumToShape(b, getLoc(), dLhs, tensorType(getLhs())),
                            sumToShape(b, getLoc(), dRhs, tensorType(getRhs()))};
}

// d(a/b) = da/b − db·(a/b)/b.
Grads DivOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dLhs = DivOp::create(b, getLoc(), dys[0], getRhs());
  Value dRhs =
      negate(b, getLoc(),
             DivOp::create(b, getLoc(), MulOp::create(b, getLoc(), dys[0], getResult()), getRhs()));
  return SmallVector<Value>{sumToShape(b, getLoc(), dLhs, tensorType(getLhs())),
                            sumToShape(b, getLoc(), dRhs, tensorType(getRhs()))};
}

Grads ReduceSumOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dy = dys[0];
  RankedTensorType xType = tensorType(getX());
  if (!getKeepdims()) {
    SmallVector<int64_t> kept(xType.getShape());
    for (int64_t a : getAxes()) kept[a] = 1;
    dy = ReshapeOp::create(b, getLoc(), RankedTensorType::get(kept, b.getF32Type()), dy);
  }
  return SmallVector<Value>{BroadcastOp::create(b, getLoc(), xType, dy)};
}

Grads BroadcastOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{sumToShape(b, getLoc(), dys[0], tensorType(getX()))};
}

Grads ReshapeOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{ReshapeOp::create(b, getLoc(), getX().getType(), dys[0])};
}

// C = op(A)·op(B). Each operand gradient is again one matmul with transposes chosen so that
// no explicit transpose is ever materialised.
Grads MatmulOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dC = dys[0], A = getLhs(), B = getRhs();
  bool tA = getTransposeLhs(), tB = getTransposeRhs();
  Location loc = getLoc();
  Value dA = tA ? MatmulOp::create(b, loc, B, dC, tB, true)     // dA = op(B)·dCᵀ
                : MatmulOp::create(b, loc, dC, B, false, !tB);  // dA = dC·op(B)ᵀ
  Value dB = tB ? MatmulOp::create(b, loc, dC, A, true, tA)     // dB = dCᵀ·op(A)
                : MatmulOp::create(b, loc, A, dC, !tA, false);  // dB = op(A)ᵀ·dC
  return SmallVector<Value>{dA, dB};
}

Grads SoftmaxCrossEntropyOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dLogits = SoftmaxCrossEntropyGradOp::create(b, getLoc(), dys[0], getLogits(), getLabels(),
                                                    getCountAttr(), getIgnoreIndexAttr());
  return SmallVector<Value>{dLogits, Value()};
}

Grads NllLossOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dx = NllLossGradOp::create(b, getLoc(), dys[0], getX(), getLabels(), getWeight(),
                                   getCountAttr(), getIgnoreIndexAttr(), getPerRowAttr());
  SmallVector<Value> grads(getNumOperands(), Value());  // none for labels and weights
  grads[0] = dx;
  return grads;
}

Grads MseOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dPred = MseGradOp::create(b, getLoc(), dys[0], getPred(), getTarget(), getCountAttr());
  return SmallVector<Value>{dPred, negate(b, getLoc(), dPred)};
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

// The same mask, redrawn: dropout of the output gradient under the forward op's key (autodiff
// runs before the passes that place micro-batches and blocks, which then mark both alike).
Grads DropoutOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{DropoutOp::create(b, getLoc(), dys[0], getRatioAttr(), getKeyAttr())};
}

Grads ScaleOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{ScaleOp::create(b, getLoc(), dys[0], getFactorAttr())};
}

//===----------------------------------------------------------------------===//
// Convolutional ops
//===----------------------------------------------------------------------===//
