// Small type helpers shared by the graph dialect's shape inference files.
#pragma once

#include "mlir/IR/BuiltinTypes.h"

namespace dtc::graph {

inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

inline int64_t rankOf(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getRank();
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

// bfloat16 or float16: the 16-bit float types of mixed precision.
inline bool is16BitFloat(mlir::Type element) { return element.isBF16() || element.isF16(); }

// Result types of an op whose first result may hold its f32 value rounded to bf16/f16
// (dtc-fold-casts folds a narrowing cast into the producer): `actual` matches `inferred` but
// for that first result's element type.
inline bool narrowableFirstResult(mlir::TypeRange inferred, mlir::TypeRange actual) {
  if (inferred.size() != actual.size() || inferred.empty()) return false;
  for (size_t i = 1; i < inferred.size(); ++i)
    if (inferred[i] != actual[i]) return false;
  if (inferred[0] == actual[0]) return true;
  auto want = mlir::dyn_cast<mlir::RankedTensorType>(inferred[0]);
  auto got = mlir::dyn_cast<mlir::RankedTensorType>(actual[0]);
  return want && got && want.getShape() == got.getShape() && want.getElementType().isF32() &&
         is16BitFloat(got.getElementType());
}

// Whether `actual` is `inferred` with its one result widened from a 16-bit type to f32 (a
// contraction that keeps its f32 sum unrounded: a weight gradient for f32 master weights).
inline bool widenableResult(mlir::TypeRange inferred, mlir::TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1) return false;
  if (inferred[0] == actual[0]) return true;
  auto want = mlir::dyn_cast<mlir::RankedTensorType>(inferred[0]);
  auto got = mlir::dyn_cast<mlir::RankedTensorType>(actual[0]);
  return want && got && want.getShape() == got.getShape() && is16BitFloat(want.getElementType()) &&
         got.getElementType().isF32();
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
