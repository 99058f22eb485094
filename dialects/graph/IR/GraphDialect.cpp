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

#define DTC_DECLARED_ATTRIBUTES_FILE "graph/IR/GraphAttributes.def"
#include "common/DeclaredAttributeTable.inc"

DTC_VERIFY_DECLARED_ATTRIBUTES(GraphDialect, kDeclared)
