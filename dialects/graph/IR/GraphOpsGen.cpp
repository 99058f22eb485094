// The TableGen-generated op and interface definitions, in a translation unit of their own.
#include "graph/IR/GraphOps.h"

using namespace mlir;

#include "graph/IR/GraphInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "graph/IR/GraphOps.cpp.inc"
