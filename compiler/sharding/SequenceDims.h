// Where the sequence runs through a function (common/SequenceTrace.h says what the trace is;
// each op says what it does to positions through SequenceOpInterface).
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "common/SequenceTrace.h"

namespace dtc::sharding {

// The function's data arguments that hold sequences of `length` positions, with their sequence
// dimension (the one after the batch dimension).
llvm::SmallVector<std::pair<mlir::Value, int64_t>> sequenceInputs(mlir::func::FuncOp func,
                                                                  int64_t length);

// `inputs`: the function's arguments that hold sequences, with their sequence dimension.
SequenceFlow traceSequence(mlir::func::FuncOp func,
                           llvm::ArrayRef<std::pair<mlir::Value, int64_t>> inputs);

}  // namespace dtc::sharding
