#include "plan/IR/PlanDialect.h"

#include "plan/IR/PlanOps.h"

#include "common/DeclaredAttributes.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace dtc::plan;

#include "plan/IR/PlanDialect.cpp.inc"

#define DTC_DECLARED_ATTRIBUTES_FILE "plan/IR/PlanAttributes.def"
#include "common/DeclaredAttributeTable.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "plan/IR/PlanOps.cpp.inc"
      >();
}

DTC_VERIFY_DECLARED_ATTRIBUTES(PlanDialect, kDeclared)
