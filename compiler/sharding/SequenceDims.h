// Where the sequence runs through a function: from the data inputs' sequence dimension, forward
// through the ops that keep positions apart (embeddings, element-wise and broadcast arithmetic,
// normalisation over features, projections, reshapes and transposes that keep the dimension,
// attention, rotary embeddings) to the losses that sum over positions. Context parallelism asks
// two things of it: which tensors are indexed by position (a learned position table added to the
// tokens, rotary tables), since they must split or reorder with the sequence; and which ops read
// the sequence in order (anything else a position reaches), which a reordered sequence breaks.
#pragma once

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dtc::sharding {

struct SequenceFlow {
  // Values indexed by position along one dimension that no sequence reached: function
  // arguments (a position-embedding table, rotary tables) or values computed from them.
  struct PositionTable {
    mlir::Value value;
    int64_t dim;
  };
  llvm::SmallVector<PositionTable> tables;
  // Ops that a position reaches and that do not keep positions apart (or that this analysis does
  // not know): in order, with what they do to the sequence.
  llvm::SmallVector<std::pair<mlir::Operation*, std::string>> ordered;
  // Each value's sequence dimension (absent: none; kMergedRows: merged into rows with the batch,
  // as a loss reads logits).
  llvm::DenseMap<mlir::Value, int64_t> dims;
  static constexpr int64_t kMergedRows = -1;
};

// The function's data arguments that hold sequences of `length` positions, with their sequence
// dimension (the one after the batch dimension).
llvm::SmallVector<std::pair<mlir::Value, int64_t>> sequenceInputs(mlir::func::FuncOp func,
                                                                  int64_t length);

// `inputs`: the function's arguments that hold sequences, with their sequence dimension.
SequenceFlow traceSequence(mlir::func::FuncOp func,
                           llvm::ArrayRef<std::pair<mlir::Value, int64_t>> inputs);

}  // namespace dtc::sharding
