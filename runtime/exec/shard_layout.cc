#include "exec/shard_layout.h"

#include <algorithm>
#include <cstring>

namespace dtc {

std::vector<DimCut> cutsOf(const ShardingVector* sharding, size_t rank,
                           const comm::DeviceMesh* mesh) {
  if (!sharding || !mesh) return std::vector<DimCut>(rank);
  return cutsAt(sharding, rank, mesh->sizes(), mesh->coords());
}

std::vector<DimCut> cutsAt(const ShardingVector* sharding, size_t rank,
                           const std::vector<int64_t>& sizes, const std::vector<int64_t>& coords) {
  std::vector<DimCut> cuts(rank);
  if (!sharding) return cuts;
  for (size_t d = 0; d < rank && d < sharding->size(); ++d) {
    const auto* axes = sharding->Get(d)->axes();
    if (!axes) continue;
    bool valid = true;
    for (int a : *axes) valid &= a >= 0 && a < static_cast<int>(sizes.size());
    if (!valid) continue;
    cuts[d].axes.assign(axes->begin(), axes->end());
    // As DeviceMesh::groupSize and indexIn: row-major over the axes in the order given.
    for (int a : cuts[d].axes) {
      cuts[d].parts *= sizes[a];
      cuts[d].index = cuts[d].index * sizes[a] + coords[a];
    }
    cuts[d].blocks = std::max<int64_t>(1, sharding->Get(d)->blocks());
  }
  return cuts;
}

std::vector<int64_t> meshCoords(int64_t rank, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> coords(sizes.size(), 0);
  for (int i = static_cast<int>(sizes.size()) - 1; i >= 0; --i) {
    coords[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return coords;
}

bool isSharded(const std::vector<DimCut>& cuts) {
  for (const DimCut& c : cuts)
    if (c.parts > 1) return true;
  return false;
}

namespace {

// The row-major view in which chunked dimensions are [chunks, chunk size], the cut on the
// second: the same bytes, plain cuts only.
void unchunk(std::vector<int64_t>& shape, std::vector<DimCut>& cuts) {
  std::vector<int64_t> s;
  std::vector<DimCut> c;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (cuts[d].blocks > 1) {
      s.push_back(cuts[d].blocks);
      c.push_back(DimCut{});
      s.push_back(shape[d] / cuts[d].blocks);
      DimCut inner = cuts[d];
      inner.blocks = 1;
      c.push_back(inner);
    } else {
      s.push_back(shape[d]);
      c.push_back(cuts[d]);
    }
  }
  shape.swap(s);
  cuts.swap(c);
}

}  // namespace

void extractShard(const uint8_t* global, const std::vector<int64_t>& shape, size_t elementSize,
                  const std::vector<DimCut>& chunkedCuts, uint8_t* local) {
  std::vector<int64_t> globalShape(shape);
  std::vector<DimCut> cuts(chunkedCuts);
  unchunk(globalShape, cuts);
  const size_t rank = globalShape.size();
  std::vector<int64_t> localShape(globalShape), strides(rank, 1);
  for (size_t d = 0; d < rank; ++d) localShape[d] /= cuts[d].parts;
  for (int d = static_cast<int>(rank) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * globalShape[d + 1];
  int64_t total = 1;
  for (int64_t s : localShape) total *= s;
  // Rows of the last dimension are contiguous in both.
  const int64_t row = rank ? localShape[rank - 1] : 1;
  std::vector<int64_t> at(rank, 0);
  for (int64_t done = 0; done < total; done += row) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += (cuts[d].index * localShape[d] + at[d]) * strides[d];
    std::memcpy(local + done * elementSize, global + src * elementSize, row * elementSize);
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      if (++at[d] < localShape[d]) break;
      at[d] = 0;
    }
  }
}

}  // namespace dtc
