#include "dist/IR/DistDialect.h"

#include "dist/IR/DistOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

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
