#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dist/IR/DistDialect.h"

#define GET_ATTRDEF_CLASSES
#include "dist/IR/DistAttrs.h.inc"

#define GET_OP_CLASSES
#include "dist/IR/DistOps.h.inc"

namespace dtc::dist {

// Attribute names on modules, functions and ops.
inline constexpr const char kMeshAttr[] = "dist.mesh";            // module: MeshAttr
inline constexpr const char kShardingAttr[] = "dist.sharding";    // func arg/result: ShardingAttr
inline constexpr const char kShardingsAttr[] = "dist.shardings";  // op: one per result
// Present on an annotation that a user (or a strategy on a user's behalf) wrote: it wins over
// propagated shardings.
inline constexpr const char kUserAttr[] = "dist.user";

// The module's mesh, or null.
MeshAttr getMesh(mlir::Operation* op);

}  // namespace dtc::dist
