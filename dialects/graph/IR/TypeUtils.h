// Small type helpers shared by the graph dialect's shape inference files.
#pragma once

#include "mlir/IR/BuiltinTypes.h"

namespace dtc::graph {

inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

inline mlir::RankedTensorType f32Tensor(mlir::MLIRContext* ctx, llvm::ArrayRef<int64_t> shape) {
  return mlir::RankedTensorType::get(shape, mlir::Float32Type::get(ctx));
}

}  // namespace dtc::graph
