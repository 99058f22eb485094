// Marks later passes and the plan writer read off ops (pipeline stage, micro-batch, backward):
// an op that replaces others carries them on.
#pragma once

#include "mlir/IR/Operation.h"

namespace dtc {

inline void inheritMarks(mlir::Operation* from, mlir::Operation* to) {
  for (mlir::NamedAttribute attr : from->getDiscardableAttrs())
    to->setAttr(attr.getName(), attr.getValue());
}

}  // namespace dtc
