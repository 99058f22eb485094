// Which keys a query of causal attention sees when the step holds blocks of a sequence, or the
// sequence in another order: context parallelism splits the queries over devices (each device's
// block starts at its own row of the whole) and may lay the sequence out load-balanced, cut into
// 2·cp chunks with chunk i next to chunk 2·cp−1−i, so that device i holds one early and one late
// chunk. A query sees a key when the key's place in the original sequence is not after its own.
// Shared by both backends' kernels and the data loader, which reads sequences in that order.
#pragma once

#include <cstdint>

// The CUDA kernels evaluate the same positions on the device.
#ifdef __CUDACC__
#define DTC_POSITIONS_HD __host__ __device__
#else
#define DTC_POSITIONS_HD
#endif

namespace dtc {

// Row `row` of a sequence of `length` rows laid out load-balanced in `chunks` chunks (an even
// number dividing it): its place in the original sequence. chunks 0: the original order.
DTC_POSITIONS_HD inline int64_t sequencePosition(int64_t row, int64_t length, int64_t chunks) {
  if (chunks <= 0) return row;
  const int64_t chunk = length / chunks, pair = row / (2 * chunk), within = row % (2 * chunk);
  const int64_t original = within < chunk ? pair : chunks - 1 - pair;
  return original * chunk + within % chunk;
}

struct AttentionPositions {
  int64_t qFirst = 0;  // the queries' first row in the whole sequence (in its layout)
  int64_t kFirst = 0;  // the keys' first row
  int64_t length = 0;  // rows of the whole sequence
  int64_t chunks = 0;  // load-balanced layout in this many chunks; 0: the original order

  DTC_POSITIONS_HD int64_t queryPosition(int64_t i) const {
    return sequencePosition(qFirst + i, length, chunks);
  }
  DTC_POSITIONS_HD int64_t keyPosition(int64_t j) const {
    return sequencePosition(kFirst + j, length, chunks);
  }
  // True when nothing is reordered or offset: key j is seen by query i exactly when j <= i.
  DTC_POSITIONS_HD bool plain() const { return qFirst == 0 && kFirst == 0 && chunks == 0; }
};

}  // namespace dtc
