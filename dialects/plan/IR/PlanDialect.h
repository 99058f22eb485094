#pragma once

#include "mlir/IR/Dialect.h"

#include "plan/IR/PlanDialect.h.inc"

namespace dtc::attr {
#define DTC_DIALECT_ATTR(constant, name, Kind, places) \
  inline constexpr const char constant[] = name;
#include "plan/IR/PlanAttributes.def"
#undef DTC_DIALECT_ATTR
}  // namespace dtc::attr
