// The geometry of sharded tensors in a checkpoint: every piece of state is a box (offsets and
// sizes per dimension) of the whole tensor, whatever mesh cut it, so a checkpoint written under
// one layout loads under any other by intersecting boxes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/shard_layout.h"

namespace dtc::checkpoint {

struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t elements() const;
  bool operator==(const Box& other) const {
    return offsets == other.offsets && sizes == other.sizes;
  }
};

// "[0:4,2:3]": a box in an error message.
std::string boxText(const Box& box);
// The box of a whole tensor.
Box wholeBox(const std::vector<int64_t>& shape);
// The common part of `a` and `b`, or false when they do not meet.
bool intersect(const Box& a, const Box& b, Box& out);

// A device's block of a tensor is one box, or with chunked dimensions (a fused q/k/v weight
// split by heads) one box per combination of chunks. Each piece knows where it starts in the
// device's local tensor.
struct Piece {
  Box global;
  std::vector<int64_t> localOffsets;
};

// The pieces of the block a device cut as `cuts` holds of a tensor of `globalShape`, in the
// order of their place in the local tensor.
std::vector<Piece> piecesOf(const std::vector<int64_t>& globalShape,
                            const std::vector<DimCut>& cuts);

// A dense row-major array of `shape` whose element [0, …, 0] sits at `origin` in the whole
// tensor's coordinates (origin may be negative: a local tensor whose piece starts later in it).
struct Placed {
  std::vector<int64_t> shape, origin;
};

// Copies `region` (whole-tensor coordinates, inside both arrays) from `src` to `dst`.
void copyRegion(const uint8_t* src, const Placed& srcPlace, uint8_t* dst, const Placed& dstPlace,
                const Box& region, size_t elementSize);

}  // namespace dtc::checkpoint
