#include "graph/IR/GraphDialect.h"

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
