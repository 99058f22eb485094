#pragma once

#include "mlir/IR/Dialect.h"

#include "graph/IR/GraphDialect.h.inc"

// The names of the graph dialect's declared attributes (GraphAttributes.def).
namespace dtc::attr {
#define DTC_DIALECT_ATTR(constant, name, Kind, places) \
  inline constexpr const char constant[] = name;
#include "graph/IR/GraphAttributes.def"
#undef DTC_DIALECT_ATTR
}  // namespace dtc::attr
