// Where the sequence runs through a function: from the data inputs' sequence dimension, forward
// through the ops that keep positions apart (embeddings, element-wise and broadcast arithmetic,
// normalisation over features, projections, reshapes and transposes that keep the dimension,
// attention, rotary embeddings) to the losses that sum over positions. Context parallelism asks
// two things of it: which tensors are indexed by position (a learned position table added to the
// tokens, rotary tables), since they must split or reorder with the sequence; and which ops read
// the sequence in order (anything else a position reaches), which a reordered sequence breaks.
//
// Each op says what it does to positions (SequenceOpInterface, implemented beside the op); the
// trace an op reads and writes, and the behaviours many ops share, are here.
#pragma once

#include <string>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Operation.h"

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

// One op's view of the flow: which of its operands a sequence reached, along which dimension,
// and what the op says of its results.
class SequenceTrace {
 public:
  // An operand the sequence reached: its index and sequence dimension.
  struct Carried {
    unsigned operand;
    int64_t dim;
  };

  SequenceTrace(SequenceFlow& flow, mlir::Operation* op, llvm::ArrayRef<Carried> carried)
      : flow_(flow), op_(op), carried_(carried) {}

  mlir::Operation* op() const { return op_; }
  // Every operand a sequence reached, in operand order (never empty).
  llvm::ArrayRef<Carried> carried() const { return carried_; }
  // The first of them: its operand index and sequence dimension.
  unsigned operand() const { return carried_.front().operand; }
  int64_t dim() const { return carried_.front().dim; }
  // Whether a sequence reached `v`.
  bool reached(mlir::Value v) const { return flow_.dims.count(v) != 0; }

  // `v` holds the sequence along `dim` (or SequenceFlow::kMergedRows).
  void set(mlir::Value v, int64_t dim) { flow_.dims[v] = dim; }
  // The op reads positions in order: `why` says how (a phrase after the op's name).
  void ordered(const char* why) { flow_.ordered.push_back({op_, why}); }
  // `v`, which no sequence reached, is indexed by position along `dim`.
  void table(mlir::Value v, int64_t dim);

 private:
  SequenceFlow& flow_;
  mlir::Operation* op_;
  llvm::ArrayRef<Carried> carried_;
};

// Behaviours many ops share.
// Results of the first carried operand's shape hold the sequence where it does (element-wise
// ops, and gradients shaped as their forward's input).
void sequenceThroughSameShape(SequenceTrace& trace);
// Over the last dimension only (softmax, normalisation, projections): the sequence must be
// another dimension of the first operand, and results keep it where they have it.
void sequenceOverFeatures(SequenceTrace& trace);
// NumPy broadcasting: the result's sequence dimension from the operands that have it; an operand
// without one that is not broadcast there is indexed by position.
void sequenceBroadcasting(SequenceTrace& trace);
// The trace follows the forward computation: gradients, and the updates and checks that read
// them, pass no positions on.
void sequenceStopsAtGradient(SequenceTrace& trace);

}  // namespace dtc::sharding
