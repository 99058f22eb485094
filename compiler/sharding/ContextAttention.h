// What context parallelism's attention rewrites (dtc-ring-attention, dtc-ulysses-attention) read
// off the partitioned program: an attention whose queries are split over the sequence axes
// (`seq_axes`) reads keys and values gathered over them, and its key and value gradients are
// reduce-scattered back over them. Each rewrite replaces those collectives with its own.
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

#include "dist/IR/DistOps.h"

namespace dtc::sharding {

// An attention (forward or gradient) whose queries are split over `axes`, as the partitioner left
// it: the blocks of keys and values its gathers reassemble and, for the gradient, the
// reduce-scatters that are every use of its key and value gradients (partial over the split).
struct SplitAttention {
  mlir::Operation* op = nullptr;
  mlir::ArrayAttr axes;
  mlir::Value keys, values;  // this device's blocks
  llvm::SmallVector<dist::ReduceScatterOp> keyScatters, valueScatters;
};

// The attention ops of `root` whose queries are split (`seq_axes`), in program order.
llvm::SmallVector<mlir::Operation*> splitAttention(mlir::Operation* root);

// `op` read as above, or an error on it, in the words of `method`, naming what was found instead.
mlir::FailureOr<SplitAttention> readSplitAttention(mlir::Operation* op, llvm::StringRef method);

// Puts a rewrite's results in the attention's place: out and lse; for the gradient dq, then dk and
// dv (this device's block, summed over the split), which stand for the reduce-scatters' results.
// Erases the attention, the scatters and the gathers nothing reads any more.
void replaceSplitAttention(const SplitAttention& attention, mlir::ValueRange results);

// What a new op takes from the one it replaces: its marks (pipeline unit, backward, recomputed)
// and, with `all`, its other attributes (an attention's); never its result shardings, which were
// the partitioner's for other results.
void copyAttributes(mlir::Operation* from, mlir::Operation* to, bool all);

}  // namespace dtc::sharding
