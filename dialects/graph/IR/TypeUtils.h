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

// A contraction's operands share one float element type (f32, or bf16/f16 under mixed
// precision), which its result keeps; null when they differ.
inline mlir::Type contractionElement(mlir::Value a, mlir::Value b) {
  mlir::Type ta = mlir::cast<mlir::RankedTensorType>(a.getType()).getElementType();
  mlir::Type tb = mlir::cast<mlir::RankedTensorType>(b.getType()).getElementType();
  return ta == tb ? ta : mlir::Type();
}

inline mlir::Type elementOf(mlir::Value value) {
  return mlir::cast<mlir::RankedTensorType>(value.getType()).getElementType();
}

// The element type every value of `values` shares, or null.
inline mlir::Type commonElement(mlir::ValueRange values) {
  mlir::Type common;
  for (mlir::Value v : values) {
    mlir::Type t = mlir::cast<mlir::RankedTensorType>(v.getType()).getElementType();
    if (common && t != common) return mlir::Type();
    common = t;
  }
  return common;
}

}  // namespace dtc::graph
