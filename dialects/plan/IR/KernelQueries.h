// What passes after the graph level ask of an op: the runtime kernel it runs and that kernel's
// parameters, whether the op is already a plan.kernel call or still the graph/dist op it lowers
// from (memory planning and the pipeline's cost model run on both levels).
#pragma once

#include <string>
#include <vector>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include "ops/kernel_registry.h"
#include "plan/IR/PlanOps.h"

namespace dtc {

inline std::string kernelNameOf(mlir::Operation* op) {
  if (auto call = mlir::dyn_cast<plan::KernelOp>(op)) return call.getKernel().str();
  return op->getName().stripDialect().str();
}

inline const KernelInfo* kernelOf(mlir::Operation* op) { return findKernel(kernelNameOf(op)); }

// The integer parameter `name` of the op's kernel, or `fallback` when it has none.
inline int64_t intParam(mlir::Operation* op, llvm::StringRef name, int64_t fallback = 0) {
  mlir::Attribute value;
  if (auto call = mlir::dyn_cast<plan::KernelOp>(op))
    value = call.getParams().get(name);
  else
    value = op->getAttr(name);
  if (auto n = mlir::dyn_cast_or_null<mlir::IntegerAttr>(value)) return n.getInt();
  return fallback;
}

// The integer-list parameter `name` of the op's kernel, or empty when it has none.
inline std::vector<int64_t> intsParam(mlir::Operation* op, llvm::StringRef name) {
  mlir::Attribute value;
  if (auto call = mlir::dyn_cast<plan::KernelOp>(op))
    value = call.getParams().get(name);
  else
    value = op->getAttr(name);
  if (auto ints = mlir::dyn_cast_or_null<mlir::DenseI64ArrayAttr>(value))
    return std::vector<int64_t>(ints.asArrayRef().begin(), ints.asArrayRef().end());
  return {};
}

}  // namespace dtc
