#include "checkpoint/boxes.h"

#include <algorithm>
#include <cstring>

namespace dtc::checkpoint {

int64_t Box::elements() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::string boxText(const Box& b) {
  std::string s = "[";
  for (size_t d = 0; d < std::min(b.sizes.size(), b.offsets.size()); ++d)
    s += (d ? "," : "") + std::to_string(b.offsets[d]) + ":" +
         std::to_string(b.offsets[d] + b.sizes[d]);
  return s + "]";
}

Box wholeBox(const std::vector<int64_t>& shape) {
  return Box{std::vector<int64_t>(shape.size(), 0), shape};
}

bool intersect(const Box& a, const Box& b, Box& out) {
  if (a.offsets.size() != b.offsets.size()) return false;
  out.offsets.resize(a.offsets.size());
  out.sizes.resize(a.offsets.size());
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    int64_t begin = std::max(a.offsets[d], b.offsets[d]);
    int64_t end = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (end <= begin) return false;
    out.offsets[d] = begin;
    out.sizes[d] = end - begin;
  }
  return true;
}

std::vector<Piece> piecesOf(const std::vector<int64_t>& globalShape,
                            const std::vector<DimCut>& cuts) {
  const size_t rank = globalShape.size();
  // Per dimension: the intervals (whole-tensor offset, local offset) of the device's block; a
  // dimension of k chunks has k of them, each 1/parts of its chunk.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> intervals(rank);
  std::vector<int64_t> sizes(rank);
  for (size_t d = 0; d < rank; ++d) {
    const DimCut cut = d < cuts.size() ? cuts[d] : DimCut{};
    const int64_t blocks = std::max<int64_t>(1, cut.blocks);
    const int64_t chunk = globalShape[d] / blocks;
    sizes[d] = chunk / cut.parts;
    for (int64_t b = 0; b < blocks; ++b)
      intervals[d].push_back({b * chunk + cut.index * sizes[d], b * sizes[d]});
  }
  std::vector<Piece> pieces;
  std::vector<size_t> at(rank, 0);
  while (true) {
    Piece p;
    for (size_t d = 0; d < rank; ++d) {
      p.global.offsets.push_back(intervals[d][at[d]].first);
      p.global.sizes.push_back(sizes[d]);
      p.localOffsets.push_back(intervals[d][at[d]].second);
    }
    pieces.push_back(std::move(p));
    int d = static_cast<int>(rank) - 1;
    for (; d >= 0; --d) {
      if (++at[d] < intervals[d].size()) break;
      at[d] = 0;
    }
    if (d < 0) break;
  }
  return pieces;
}

void copyRegion(const uint8_t* src, const Placed& srcPlace, uint8_t* dst, const Placed& dstPlace,
                const Box& region, size_t elementSize) {
  const size_t rank = region.sizes.size();
  if (region.elements() == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elementSize);
    return;
  }
  auto strides = [&](const std::vector<int64_t>& shape) {
    std::vector<int64_t> s(rank, 1);
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
    return s;
  };
  const std::vector<int64_t> srcStrides = strides(srcPlace.shape),
                             dstStrides = strides(dstPlace.shape);
  // Merge trailing dimensions that are whole in both arrays into one contiguous run.
  size_t inner = rank - 1;
  int64_t run = region.sizes[inner];
  while (inner > 0 && region.sizes[inner] == srcPlace.shape[inner] &&
         region.sizes[inner] == dstPlace.shape[inner]) {
    --inner;
    run *= region.sizes[inner];
  }
  const size_t runBytes = static_cast<size_t>(run) * elementSize;
  std::vector<int64_t> at(inner, 0);
  while (true) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t i = region.offsets[d] + (d < inner ? at[d] : 0);
      s += (i - srcPlace.origin[d]) * srcStrides[d];
      t += (i - dstPlace.origin[d]) * dstStrides[d];
    }
    std::memcpy(dst + t * elementSize, src + s * elementSize, runBytes);
    int d = static_cast<int>(inner) - 1;
    for (; d >= 0; --d) {
      if (++at[d] < region.sizes[d]) break;
      at[d] = 0;
    }
    if (d < 0) break;
  }
}

}  // namespace dtc::checkpoint
