// Shape inference of linear, linear_grad_input and linear_grad_weight.
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;
using namespace dtc::graph;

std::optional<std::string> dtc::graph::checkLinear(ArrayRef<int64_t> x, ArrayRef<int64_t> weight) {
  if (x.size() < 2) return "linear input must have rank >= 2, got " + shapeString(x);
  if (weight.size() != 2) return "linear weight must be [out, in], got " + shapeString(weight);
  if (x.back() != weight[1])
    return "input " + shapeString(x) + " has " + std::to_string(x.back()) +
           " features, the weight " + shapeString(weight) + " takes " + std::to_string(weight[1]);
  return std::nullopt;
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX()), w = shapeOf(adaptor.getWeight());
  if (auto error = checkLinear(x, w)) return emitOptionalError(loc, *error);
  SmallVector<int64_t> y(x.drop_back());
  y.push_back(w[0]);
  types.push_back(f32Tensor(ctx, y));
  return success();
}

LogicalResult LinearGradInputOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> dy = shapeOf(adaptor.getDy()), w = shapeOf(adaptor.getWeight());
  if (dy.size() < 2 || w.size() != 2 || dy.back() != w[0])
    return emitOptionalError(loc, "linear_grad_input: dy ", shapeString(dy), " and weight ",
                             shapeString(w), " do not match");
  SmallVector<int64_t> dx(dy.drop_back());
  dx.push_back(w[1]);
  types.push_back(f32Tensor(ctx, dx));
  return success();
}

LogicalResult LinearGradWeightOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> dy = shapeOf(adaptor.getDy()), x = shapeOf(adaptor.getX());
  if (dy.size() < 2 || dy.drop_back() != x.drop_back())
    return emitOptionalError(loc, "linear_grad_weight: dy ", shapeString(dy), " and x ",
                             shapeString(x), " differ in their leading dimensions");
  types.push_back(f32Tensor(ctx, {dy.back(), x.back()}));
  return success();
}
