// What a partitioned plan sends between devices: its collectives and their bytes per call, with
// ring-algorithm volumes (what NCCL and MPI move for large messages).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planfile/plan.h"

namespace dtc {

struct CollectiveCost {
  std::string op;                    // all_reduce, all_gather, …
  std::string axes;                  // mesh axis names, "dp" or "dp,tp"
  std::vector<int64_t> axisIndices;  // the same axes, as indices into the plan's mesh
  int64_t group = 1;                 // devices taking part
  int tensors = 1;                   // tensors moved in one call (a bucket holds several)
  uint64_t bytes = 0;                // local input bytes on one device
  double sentBytes = 0;  // bytes one device sends: all_reduce 2(n-1)/n·bytes, reduce_scatter
                         // and all_to_all (n-1)/n·bytes, all_gather (n-1)·bytes, send and
                         // ring_shift bytes
  std::string loc;
};

// The collectives of `f` in program order (empty for a single-device plan).
std::vector<CollectiveCost> collectivesOf(const Plan& plan, const plan::Function& f);
// One step's, or nullopt when it is no collective (or the plan has no mesh).
std::optional<CollectiveCost> collectiveCost(const Plan& plan, const plan::Function& f,
                                             const plan::Step& step);

// Whether a collective on 16-bit operands runs in their own type where NCCL serves it: an
// all-reduce that sums, and a reduce-scatter or all-gather whose ranks' blocks are contiguous
// (nothing precedes `dim` in `wholeShape`, the scattered input or the gathered output). Elsewhere
// the runtimes run the f32 form on widened copies, twice the bytes on the wire.
bool nativeHalfCollective(plan::Kernel kernel, bool maxReduction,
                          const std::vector<int64_t>& wholeShape, int64_t dim);

// "dp=2,tp=4", or "" for a single-device plan.
std::string meshText(const Plan& plan);
int64_t meshDevices(const Plan& plan);
// The size of each mesh axis ({} for a single-device plan).
std::vector<int64_t> meshSizes(const Plan& plan);

}  // namespace dtc
