// Serialises a memory-planned module into the FlatBuffers plan (runtime/schema/plan.fbs).
#pragma once

#include <cstdint>
#include <vector>

#include "mlir/IR/BuiltinOps.h"

#include "model/ModelFile.h"

namespace dtc {

// `module` must have run dtc-plan-memory. Initial parameter values (or their init rules) come
// from `model`; without one (modules written by hand, tests) parameters start at zero.
// Emits an error and fails on anything the runtime could not execute. Without `values`, stored
// initial values are left out (each such tensor starts at zero): a plan compiled only to be
// measured (explore, --recompute auto) needs the shapes, and a long context's rotary tables
// would be copied into every one.
mlir::LogicalResult writePlan(mlir::ModuleOp module, const ModelFile* model,
                              std::vector<uint8_t>& out, bool values = true);

}  // namespace dtc
