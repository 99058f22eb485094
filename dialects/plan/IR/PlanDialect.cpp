#include "plan/IR/PlanDialect.h"

#include "plan/IR/PlanOps.h"

#include "common/DeclaredAttributes.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace dtc::plan;

#include "plan/IR/PlanDialect.cpp.inc"

namespace {
using namespace dtc::attr_place;
constexpr dtc::DeclaredAttribute kDeclared[] = {
#define DTC_DIALECT_ATTR DTC_DECLARED_ATTRIBUTE_ENTRY
#include "plan/IR/PlanAttributes.def"
#undef DTC_DIALECT_ATTR
};
}  // namespace

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "plan/IR/PlanOps.cpp.inc"
      >();
}

LogicalResult PlanDialect::verifyOperationAttribute(Operation* op, NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, dtc::placeOf(op), attr);
}

LogicalResult PlanDialect::verifyRegionArgAttribute(Operation* op, unsigned, unsigned index,
                                                    NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, OnArgument, attr, index);
}

LogicalResult PlanDialect::verifyRegionResultAttribute(Operation* op, unsigned, unsigned index,
                                                       NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, OnResult, attr, index);
}
