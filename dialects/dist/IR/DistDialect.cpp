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

#define DTC_DECLARED_ATTRIBUTES_FILE "dist/IR/DistAttributes.def"
#include "common/DeclaredAttributeTable.inc"

DTC_VERIFY_DECLARED_ATTRIBUTES(DistDialect, kDeclared)
