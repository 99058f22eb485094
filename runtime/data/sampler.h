// The order in which dtrun visits samples: a reproducible permutation per epoch.
#pragma once

#include <cstdint>
#include <vector>

#include "data/tokens.h"
#include "io/npy.h"

namespace dtc::data {

// splitmix64: advances `state` and returns 64 well-mixed bits.
uint64_t splitmix64(uint64_t& state);

// The starting state of random stream `index` (an epoch, a step) of `seed`: one splitmix64
// round over seed ^ 0x9E3779B97F4A7C15·(index + 1). Mixing matters: without it, stream i+1
// would replay stream i's counters shifted by one draw (consecutive steps would draw nearly the
// same windows).
uint64_t streamState(uint64_t seed, uint64_t index);

// Epoch `epoch`'s order of [0, n): Fisher–Yates driven by splitmix64 from
// state = streamState(seed, epoch); for i = n-1 … 1: j = next % (i + 1).
// Reproduced in Python by tests/e2e/dtc_harness.py: keep the two in step.
std::vector<int64_t> epochPermutation(int64_t n, uint64_t seed, int64_t epoch);

// Consecutive batches of each epoch's permutation; the last partial batch is dropped
// (DataLoader's drop_last=True), and the next epoch starts with a new permutation. A step's
// batch depends on the step alone, so a resumed run continues the same order.
// Requires 0 < batchSize <= numSamples (callers check it against the data and report).
class EpochSampler {
 public:
  EpochSampler(int64_t numSamples, int64_t batchSize, uint64_t seed);
  // The batch of 0-based `step`: batch `step % batchesPerEpoch()` of epoch
  // `step / batchesPerEpoch()`.
  const std::vector<int64_t>& batch(int64_t step);
  // The batch after the last one returned (starting at step 0).
  const std::vector<int64_t>& nextBatch() { return batch(next_++); }
  int64_t batchesPerEpoch() const { return batchSize_ > 0 ? numSamples_ / batchSize_ : 0; }

 private:
  int64_t numSamples_, batchSize_;
  uint64_t seed_;
  int64_t epoch_ = -1, next_ = 0;
  std::vector<int64_t> order_, batch_;
};

// Copies rows `indices` of `array` (a row is everything after the first dimension) into
// `dst`, one after another. Indices must be in [0, array.rows()).
void gatherRows(const io::NpyArray& array, const std::vector<int64_t>& indices, void* dst);
// The same, each row's positions along dimension 1 in `runs` only (`length` of them in a row):
// a device's part of each sequence under context parallelism.
void gatherRowRuns(const io::NpyArray& array, const std::vector<int64_t>& indices,
                   const std::vector<SequenceRun>& runs, int64_t length, void* dst);

}  // namespace dtc::data
