// Shape rules and type inference of the convolutional ops (GraphConvOps.td).
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace dtc::graph;

namespace {

bool positivePair(ArrayRef<int64_t> v) { return v.size() == 2 && v[0] > 0 && v[1] > 0; }

}  // namespace

namespace dtc::graph {

std::optional<std::string> checkConv2d(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                                       ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                       SmallVectorImpl<int64_t>& out) {
  if (x.size() != 4 || w.size() != 4)
    return "conv2d needs NCHW input and [out, in, kh, kw] weight, got " + shapeString(x) + " and " +
           shapeString(w);
  if (w[1] != x[1])
    return "conv2d weight expects " + std::to_string(w[1]) + " input channels, input has " +
           std::to_string(x[1]);
  if (!positivePair(stride) || padding.size() != 2 || padding[0] < 0 || padding[1] < 0)
    return std::string("conv2d needs two positive strides and two non-negative paddings");
  // Padding comes from model files: the padded extent must not overflow.
  int64_t paddedH, paddedW;
  if (llvm::MulOverflow(padding[0], int64_t(2), paddedH) ||
      llvm::AddOverflow(paddedH, x[2], paddedH) ||
      llvm::MulOverflow(padding[1], int64_t(2), paddedW) ||
      llvm::AddOverflow(paddedW, x[3], paddedW))
    return "conv2d padding " + shapeString(padding) + " is too large";
  if (paddedH < w[2] || paddedW < w[3])
    return "conv2d kernel " + shapeString(w.drop_front(2)) + " is larger than the padded input " +
           shapeString(x.drop_front(2));
  out.assign({x[0], w[0], (paddedH - w[2]) / stride[0] + 1, (paddedW - w[3]) / stride[1] + 1});
  return std::nullopt;
}

std::optional<std::string> checkMaxPool2d(ArrayRef<int64_t> x, ArrayRef<int64_t> kernel,
                                          ArrayRef<int64_t> stride, SmallVectorImpl<int64_t>& out) {
  if (x.size() != 4) return "max_pool2d needs NCHW input, got " + shapeString(x);
  if (!positivePair(kernel) || !positivePair(stride))
    return std::string("max_pool2d needs two positive kernel sizes and strides");
  if (x[2] < kernel[0] || x[3] < kernel[1])
    return "max_pool2d kernel " + shapeString(kernel) + " is larger than the input " +
           shapeString(x.drop_front(2));
  out.assign({x[0], x[1], (x[2] - kernel[0]) / stride[0] + 1, (x[3] - kernel[1]) / stride[1] + 1});
  return std::nullopt;
}

std::optional<std::string> checkBatchNorm(ArrayRef<int64_t> x,
                                          ArrayRef<ArrayRef<int64_t>> perChannel) {
  if (x.size() != 4) return "batch_norm needs NCHW input, got " + shapeString(x);
  for (ArrayRef<int64_t> p : perChannel)
    if (p.size() != 1 || p[0] != x[1])
      return "batch_norm parameters and statistics must be [" + std::to_string(x[1]) + "], got " +
             shapeString(p);
  return std::nullopt;
}

}  // namespace dtc::graph

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type>& types) {
  SmallVector<int64_t> out;
  if (auto error = checkConv2d(shapeOf(adaptor.getX()), shapeOf(adaptor.getWeight()),
                               adaptor.getStride(), adaptor.getPadding(), out))
    return emitOptionalError(loc, *error);
  types.push_back(f32Tensor(ctx, out));
  return success();
}

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  SmallVector<int64_t> out;
  if (auto error =
          checkMaxPool2d(shapeOf(adaptor.getX()), adaptor.getKernel(), adaptor.getStride(), out))
    return emitOptionalError(loc, *error);
  types.push_back(f32Tensor(ctx, out));
  return success();
}

LogicalResult BatchNormTrainOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                 Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  if (auto error =
          checkBatchNorm(x, {shapeOf(adaptor.getWeight()), shapeOf(adaptor.getBias()),
                             shapeOf(adaptor.getRunningMean()), shapeOf(adaptor.getRunningVar())}))
    return emitOptionalError(loc, *error);
  types.push_back(adaptor.getX().getType());
  types.append(4, f32Tensor(ctx, {x[1]}));
  return success();
}

LogicalResult BatchNormTrainGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getX().getType());
  types.append(2, adaptor.getWeight().getType());
  return success();
}

LogicalResult BatchNormEvalOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (auto error =
          checkBatchNorm(shapeOf(adaptor.getX()),
                         {shapeOf(adaptor.getWeight()), shapeOf(adaptor.getBias()),
                          shapeOf(adaptor.getRunningMean()), shapeOf(adaptor.getRunningVar())}))
    return emitOptionalError(loc, *error);
  types.push_back(adaptor.getX().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Synchronised BatchNorm pieces: per-channel results [C] of NCHW x.
//===----------------------------------------------------------------------===//

namespace {

LogicalResult perChannelTypes(MLIRContext* ctx, std::optional<Location> loc, Value x,
                              ValueRange perChannel, unsigned count, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> shape = shapeOf(x);
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : perChannel) shapes.push_back(shapeOf(v));
  if (auto error = checkBatchNorm(shape, shapes)) return emitOptionalError(loc, *error);
  types.append(count, f32Tensor(ctx, {shape[1]}));
  return success();
}

}  // namespace

LogicalResult BatchNormSumOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type>& types) {
  return perChannelTypes(ctx, loc, adaptor.getX(), {}, 1, types);
}

LogicalResult BatchNormCenteredSquaresOp::inferReturnTypes(MLIRContext* ctx,
                                                           std::optional<Location> loc,
                                                           Adaptor adaptor,
                                                           SmallVectorImpl<Type>& types) {
  return perChannelTypes(ctx, loc, adaptor.getX(), adaptor.getSum(), 1, types);
}

LogicalResult BatchNormNormalizeOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getX().getType());
  return perChannelTypes(ctx, loc, adaptor.getX(),
                         {adaptor.getSum(), adaptor.getSquares(), adaptor.getWeight(),
                          adaptor.getBias(), adaptor.getRunningMean(), adaptor.getRunningVar()},
                         4, types);
}

LogicalResult BatchNormGradSumsOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                    Adaptor adaptor, SmallVectorImpl<Type>& types) {
  if (adaptor.getDy().getType() != adaptor.getX().getType())
    return emitOptionalError(loc, "dy and x differ in type");
  return perChannelTypes(ctx, loc, adaptor.getX(), {adaptor.getMean(), adaptor.getRstd()}, 2,
                         types);
}

LogicalResult BatchNormGradInputOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                     Adaptor adaptor,
                                                     SmallVectorImpl<Type>& types) {
  if (adaptor.getDy().getType() != adaptor.getX().getType())
    return emitOptionalError(loc, "dy and x differ in type");
  SmallVector<Type> unused;
  if (failed(perChannelTypes(ctx, loc, adaptor.getX(),
                             {adaptor.getWeight(), adaptor.getMean(), adaptor.getRstd(),
                              adaptor.getDbias(), adaptor.getDweight()},
                             0, unused)))
    return failure();
  types.push_back(adaptor.getX().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

namespace {

// NCHW ops whose batch and spatial dimensions must stay whole (batch statistics); channels
// (dimension 1 of 4-D values, dimension 0 of per-channel vectors) share one factor.
OpShardingRule perChannel(Operation* op) {
  RuleBuilder b(op);
  int c = b.factor();
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    b.operand(i, rankOf(op->getOperand(i)) == 4 ? 1 : 0, c);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    b.result(i, rankOf(op->getResult(i)) == 4 ? 1 : 0, c);
  return b.take();
}

// Synchronised BatchNorm pieces: every dimension of NCHW values is a factor, per-channel vectors
// share the channel factor; sums over N, H, W are partial when those are split. `statistics`:
// results from 1 on come from the (whole-batch) sums, not from x.
OpShardingRule nchwWithChannels(Operation* op, bool statistics = false) {
  RuleBuilder b(op);
  SmallVector<int> fs = b.factors(4);
  auto dims = [&](Value v) -> SmallVector<int> {
    return rankOf(v) == 4 ? fs : SmallVector<int>{fs[1]};
  };
  for (unsigned i = 0; i < op->getNumOperands(); ++i) b.operandDims(i, dims(op->getOperand(i)));
  for (unsigned i = 0; i < op->getNumResults(); ++i) b.resultDims(i, dims(op->getResult(i)));
  if (statistics)
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      for (int d : {0, 2, 3}) b.independent(i, fs[d]);
  return b.take();
}

// Images: a sequence does not run through convolutions, pooling or batch statistics.
void imageSequence(SequenceTrace& trace) { trace.ordered("mixes neighbouring positions"); }

}  // namespace

OpShardingRule Conv2dOp::getShardingRule() {
  RuleBuilder b(*this);
  int n = b.factor(), oc = b.factor(), ic = b.factor();
  b.operand(0, 0, n).operand(0, 1, ic).operand(1, 0, oc).operand(1, 1, ic);
  b.result(0, 0, n).result(0, 1, oc);
  return b.take();
}
void Conv2dOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }

OpShardingRule Conv2dGradInputOp::getShardingRule() {
  RuleBuilder b(*this);
  int n = b.factor(), oc = b.factor(), ic = b.factor();
  b.operand(0, 0, n).operand(0, 1, oc).operand(1, 0, oc).operand(1, 1, ic);
  b.result(0, 0, n).result(0, 1, ic);
  return b.take();
}
void Conv2dGradInputOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }

OpShardingRule Conv2dGradWeightOp::getShardingRule() {
  RuleBuilder b(*this);
  int n = b.factor(), oc = b.factor(), ic = b.factor();
  b.operand(0, 0, n).operand(0, 1, oc).operand(1, 0, n).operand(1, 1, ic);
  b.result(0, 0, oc).result(0, 1, ic);
  return b.take();
}
void Conv2dGradWeightOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }

// Pooling: samples and channels split freely, each window needs its whole image.
static OpShardingRule poolRule(Operation* op) {
  RuleBuilder b(op);
  int n = b.factor(), c = b.factor();
  for (unsigned i = 0; i < op->getNumOperands(); ++i) b.operand(i, 0, n).operand(i, 1, c);
  b.result(0, 0, n).result(0, 1, c);
  return b.take();
}
OpShardingRule MaxPool2dOp::getShardingRule() { return poolRule(*this); }
void MaxPool2dOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }
OpShardingRule MaxPool2dGradOp::getShardingRule() { return poolRule(*this); }
void MaxPool2dGradOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }

OpShardingRule BatchNormTrainOp::getShardingRule() { return perChannel(*this); }
void BatchNormTrainOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }
OpShardingRule BatchNormTrainGradOp::getShardingRule() { return perChannel(*this); }
void BatchNormTrainGradOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }

OpShardingRule BatchNormSumOp::getShardingRule() { return nchwWithChannels(*this); }
void BatchNormSumOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }
OpShardingRule BatchNormCenteredSquaresOp::getShardingRule() { return nchwWithChannels(*this); }
void BatchNormCenteredSquaresOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }
OpShardingRule BatchNormNormalizeOp::getShardingRule() {
  return nchwWithChannels(*this, /*statistics=*/true);
}
void BatchNormNormalizeOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }
OpShardingRule BatchNormGradSumsOp::getShardingRule() { return nchwWithChannels(*this); }
void BatchNormGradSumsOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }
OpShardingRule BatchNormGradInputOp::getShardingRule() { return nchwWithChannels(*this); }
void BatchNormGradInputOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }

OpShardingRule BatchNormEvalOp::getShardingRule() {
  // Running statistics: samples are independent.
  RuleBuilder b(*this);
  SmallVector<int> fs = b.factors(4);
  b.operandDims(0, fs).resultDims(0, fs);
  for (unsigned i = 1; i < 5; ++i) b.operand(i, 0, fs[1]);
  return b.take();
}
void BatchNormEvalOp::traceSequence(SequenceTrace& trace) { imageSequence(trace); }

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

using Grads = FailureOr<SmallVector<Value>>;

Grads Conv2dOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dx = Conv2dGradInputOp::create(b, getLoc(), getX().getType(), dys[0], getWeight(),
                                       getStrideAttr(), getPaddingAttr());
  Value dw = Conv2dGradWeightOp::create(b, getLoc(), getWeight().getType(), dys[0], getX(),
                                        getStrideAttr(), getPaddingAttr());
  return SmallVector<Value>{dx, dw};
}

Grads MaxPool2dOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{MaxPool2dGradOp::create(b, getLoc(), getX().getType(), dys[0], getX(),
                                                    getKernelAttr(), getStrideAttr())};
}

Grads BatchNormTrainOp::buildGradients(OpBuilder& b, ValueRange dys) {
  // Only y carries a gradient; the statistics and running-statistics updates do not.
  if (!dys[0]) return SmallVector<Value>(5, Value());
  auto grad =
      BatchNormTrainGradOp::create(b, getLoc(), dys[0], getX(), getWeight(), getMean(), getRstd());
  return SmallVector<Value>{grad.getDx(), grad.getDweight(), grad.getDbias(), Value(), Value()};
}
