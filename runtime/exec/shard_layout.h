// Where a device's block of a sharded tensor lies in the whole tensor, and moving between the
// two: each dimension is cut into `parts` equal blocks; this device holds block `index`.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/device_mesh.h"
#include "planfile/plan.h"

namespace dtc {

struct DimCut {
  int64_t parts = 1, index = 0;
  std::vector<int> axes;  // the mesh axes that cut it (empty: whole)
  int64_t blocks = 1;     // chunks, each cut into `parts`
};

using ShardingVector = flatbuffers::Vector<flatbuffers::Offset<plan::DimSharding>>;

// This device's cut of each dimension of a tensor sharded as `sharding` (absent: whole).
std::vector<DimCut> cutsOf(const ShardingVector* sharding, size_t rank,
                           const comm::DeviceMesh* mesh);
// The same for the device at `coords` of a mesh of `sizes` (any rank's, not only this one's).
// Axes outside the mesh leave their dimension whole (the plan verifier rejects them).
std::vector<DimCut> cutsAt(const ShardingVector* sharding, size_t rank,
                           const std::vector<int64_t>& sizes, const std::vector<int64_t>& coords);
// Coordinates of world rank `rank` on a mesh of `sizes` (row-major, as DeviceMesh numbers them).
std::vector<int64_t> meshCoords(int64_t rank, const std::vector<int64_t>& sizes);
bool isSharded(const std::vector<DimCut>& cuts);

// Copies this device's block of `global` (shape `globalShape`, `elementSize` bytes each) to
// `local`.
void extractShard(const uint8_t* global, const std::vector<int64_t>& globalShape,
                  size_t elementSize, const std::vector<DimCut>& cuts, uint8_t* local);

}  // namespace dtc
