#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"

#include "ops/kernel_registry.h"
#include "plan/IR/PlanDialect.h"

#define GET_OP_CLASSES
#include "plan/IR/PlanOps.h.inc"

namespace dtc::plan {

// Whether `value` is an attribute of kind `kind` as the plan writer stores it (an int or bool,
// a float, an i64 array, an array of mesh axis names, a string).
bool holdsKernelAttr(AttrKind kind, mlir::Attribute value);

}  // namespace dtc::plan
