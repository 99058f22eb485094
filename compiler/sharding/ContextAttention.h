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

// The blocks of keys and values that `k` and `v`, gathered over `axes` along the sequence,
// reassemble; or an error on `op`, in the words of `method`, naming what was found instead.
mlir::FailureOr<std::pair<mlir::Value, mlir::Value>> keyValueBlocks(mlir::Operation* op,
                                                                    mlir::Value k, mlir::Value v,
                                                                    mlir::ArrayAttr axes,
                                                                    llvm::StringRef method);

// The reduce-scatters over `axes` along the sequence that are every use of `grad` (a key or value
// gradient, partial over the queries' split), or an error on `op`.
mlir::FailureOr<llvm::SmallVector<dist::ReduceScatterOp>> sequenceScatters(mlir::Operation* op,
                                                                           mlir::Value grad,
                                                                           mlir::ArrayAttr axes,
                                                                           llvm::StringRef method);

// What a new op takes from the one it replaces: its marks (pipeline unit, backward, recomputed)
// and, with `all`, its other attributes (an attention's); never its result shardings, which were
// the partitioner's for other results.
void copyAttributes(mlir::Operation* from, mlir::Operation* to, bool all);

// Erases the op defining `value` (a gather left behind) when nothing uses it any more.
void eraseIfDead(mlir::Value value);

}  // namespace dtc::sharding
