#include "dist/IR/DistDialect.h"

#include "common/DeclaredAttributes.h"
#include "dist/IR/DistOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace dtc::dist;

#include "dist/IR/DistDialect.cpp.inc"

#define GET_OP_CLASSES
#include "dist/IR/DistOps.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dist/IR/DistOps.cpp.inc"
      >();
  registerAttributes();
}

namespace {
using namespace dtc::attr_place;
constexpr dtc::DeclaredAttribute kDeclared[] = {
#define DTC_DIALECT_ATTR DTC_DECLARED_ATTRIBUTE_ENTRY
#include "dist/IR/DistAttributes.def"
#undef DTC_DIALECT_ATTR
};
}  // namespace

LogicalResult DistDialect::verifyOperationAttribute(Operation* op, NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, dtc::placeOf(op), attr);
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation* op, unsigned, unsigned index,
                                                    NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, OnArgument, attr, index);
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation* op, unsigned, unsigned index,
                                                       NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, OnResult, attr, index);
}
