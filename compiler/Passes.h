#pragma once

#include <memory>

#include "mlir/Pass/Pass.h"

#include "graph/IR/GraphDialect.h"
#include "plan/IR/PlanOps.h"

namespace dtc {

#define GEN_PASS_DECL
#include "Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Passes.h.inc"

}  // namespace dtc
