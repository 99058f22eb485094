// The collectives that move a tensor from one sharding to another. Plain C++ on axis indices
// (no MLIR), so a property test can execute plans on simulated devices; the partitioner turns
// the steps into dist ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::sharding {

struct Mesh {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  int64_t groupSize(const std::vector<int>& axes) const;
};

// A sharding in axis indices: per dimension the axes it is split over (major first), and the
// partial (sum) axes. `blocks[d]` > 1 cuts dimension d into that many equal chunks first, each
// split over the axes (empty: 1 everywhere).
struct Layout {
  std::vector<std::vector<int>> dims;
  std::vector<int> partial;
  std::vector<int64_t> blocks;
  std::vector<int> partialMax;  // axes awaiting a maximum (reduced by all-reduce MAX)
  int64_t blocksOf(size_t d) const { return blocks.empty() ? 1 : blocks[d]; }
  bool operator==(const Layout& o) const {
    return dims == o.dims && partial == o.partial && partialMax == o.partialMax && sameBlocks(o);
  }
  bool sameBlocks(const Layout& o) const {
    for (size_t d = 0; d < dims.size(); ++d)
      if (blocksOf(d) != o.blocksOf(d)) return false;
    return true;
  }
};

enum class StepKind { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kLocalSlice };

// One collective over the group spanning `axes`. kReduceScatter, kAllGather, kLocalSlice act on
// `dim`; kAllToAll cuts `dim` into blocks and concatenates along `concatDim`.
struct ReshardStep {
  StepKind kind;
  std::vector<int> axes;
  int dim = -1;
  int concatDim = -1;
  bool max = false;  // kAllReduce: a maximum, not a sum
};

// Steps on the tensor seen with global shape `shape` (a row-major view of it: chunked
// dimensions appear as [chunks, chunk size]); the local tensor is viewed the same way.
struct ReshardPhase {
  std::vector<int64_t> shape;
  Layout from;  // the layout the phase starts from, on `shape` (no chunks)
  std::vector<ReshardStep> steps;
  // The local shape at the start of the phase (global `shape` cut by `from`).
  std::vector<int64_t> localShape(const Mesh& mesh) const;
};

struct ReshardPlan {
  std::vector<ReshardPhase> phases;
  std::string error;  // non-empty: no plan; the reason, without the tensor's name
};

// Steps from `from` to `to` for a tensor of global `shape`. Chunked dimensions are planned on
// the [chunks, chunk size] view; a dimension whose chunking changes is gathered whole in the
// first phase and cut anew in the second. Partial axes of `from` that `to`
// keeps stay partial; the others are summed (reduce-scatter where `to` shards a dimension over
// the axis next, else all-reduce). Axes to drop from a dimension are gathered, or moved to the
// dimension that needs them by an all-to-all; axes to add are local slices. Fails, with the
// reason, when `to` adds partial axes or a dimension does not divide over its axes.
ReshardPlan planReshard(const Mesh& mesh, const std::vector<int64_t>& shape, const Layout& from,
                        const Layout& to);

// Bytes one device sends for `step` on a local tensor of `bytes` before the step, with ring
// algorithms: all-reduce 2(n-1)/n, reduce-scatter and all-to-all (n-1)/n of the input,
// all-gather (n-1) times its input, local slice nothing.
double sentBytes(const ReshardStep& step, const Mesh& mesh, double bytes);

}  // namespace dtc::sharding
