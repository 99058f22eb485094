// Dropout's mask, the same on every backend and every partitioning: element e of a tensor is kept
// when a counter-based hash of (seed, step, the op's key, e's index in the *global* tensor) lands
// at or above the ratio. A device holding a block of the tensor (data, tensor or sequence
// parallel), or one micro-batch of the step (accumulation, pipelines), computes each element's
// global index from its block's place, so it draws exactly what one device drops; the backward
// pass redraws the same mask from the same counter instead of keeping it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DTC_DROPOUT_FN __host__ __device__ inline
#else
#define DTC_DROPOUT_FN inline
#endif

namespace dtc::dropout {

constexpr int kMaxDims = 8;

// Where a device's block sits in the global tensor: its local shape, the global strides, and
// the block's first index along each dimension; `base`, the index of the global tensor's first
// element among the step's (micro-batch m of a step starts at m times its element count).
struct Placement {
  int rank = 0;
  uint64_t base = 0;
  int64_t local[kMaxDims] = {};
  int64_t globalStride[kMaxDims] = {};
  int64_t offset[kMaxDims] = {};
};

// The global index of the block's element `flat` (row-major in the local block).
DTC_DROPOUT_FN uint64_t globalIndex(const Placement& p, int64_t flat) {
  uint64_t index = p.base;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t coord = flat % p.local[d];
    flat /= p.local[d];
    index += static_cast<uint64_t>(coord + p.offset[d]) * static_cast<uint64_t>(p.globalStride[d]);
  }
  return index;
}

// splitmix64's finaliser: a bijective mix of 64 bits.
DTC_DROPOUT_FN uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 1/(1−ratio) for a kept element, 0 for a dropped one (torch.nn.functional.dropout's scaling).
// The draw is u = the top 24 bits of the mixed counter / 2^24, kept when u >= ratio.
DTC_DROPOUT_FN float keepScale(uint64_t seed, uint64_t step, uint64_t key, uint64_t index,
                               float ratio) {
  const uint64_t counter =
      mix(mix(mix(seed + 0x9E3779B97F4A7C15ull) ^ (step * 0xD1B54A32D192ED03ull)) ^
          (key * 0x8CB92BA72F3D8DD7ull)) ^
      index;
  const float u = static_cast<float>(mix(counter) >> 40) * (1.0f / 16777216.0f);
  return u >= ratio ? 1.0f / (1.0f - ratio) : 0.0f;
}

}  // namespace dtc::dropout
