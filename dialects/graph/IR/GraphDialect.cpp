#include "graph/IR/GraphDialect.h"

#include "common/DeclaredAttributes.h"
#include "graph/IR/GraphOps.h"

using namespace mlir;
using namespace dtc::graph;

#include "graph/IR/GraphDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "graph/IR/GraphOps.cpp.inc"
      >();
}

namespace {
using namespace dtc::attr_place;
constexpr dtc::DeclaredAttribute kDeclared[] = {
#define DTC_DIALECT_ATTR DTC_DECLARED_ATTRIBUTE_ENTRY
#include "graph/IR/GraphAttributes.def"
#undef DTC_DIALECT_ATTR
};
}  // namespace

LogicalResult GraphDialect::verifyOperationAttribute(Operation* op, NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, dtc::placeOf(op), attr);
}

LogicalResult GraphDialect::verifyRegionArgAttribute(Operation* op, unsigned, unsigned index,
                                                     NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, OnArgument, attr, index);
}

LogicalResult GraphDialect::verifyRegionResultAttribute(Operation* op, unsigned, unsigned index,
                                                        NamedAttribute attr) {
  return dtc::verifyDeclaredAttribute(kDeclared, op, OnResult, attr, index);
}
