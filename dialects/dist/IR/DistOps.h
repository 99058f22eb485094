#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "common/OpInterfaces.h"
#include "dist/IR/DistDialect.h"

#define GET_ATTRDEF_CLASSES
#include "dist/IR/DistAttrs.h.inc"

#define GET_OP_CLASSES
#include "dist/IR/DistOps.h.inc"

namespace dtc::dist {

// The names of the dist dialect's declared attributes (DistAttributes.def).
#define DTC_DIALECT_ATTR(constant, name, Kind, places) \
  inline constexpr const char constant[] = name;
#include "dist/IR/DistAttributes.def"
#undef DTC_DIALECT_ATTR

// The module's mesh, or null.
MeshAttr getMesh(mlir::Operation* op);

}  // namespace dtc::dist
