#include "data/sampler.h"

#include <cstring>

namespace dtc::data {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t splitmix64(uint64_t& state) {
  state += kGolden;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t streamState(uint64_t seed, uint64_t index) {
  uint64_t s = seed ^ (kGolden * (index + 1));
  return splitmix64(s);
}

std::vector<int64_t> epochPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  if (n <= 0) return {};
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  // Unsigned arithmetic throughout: the wraparound is part of the definition (and Python's).
  uint64_t state = streamState(seed, static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    uint64_t j = splitmix64(state) % static_cast<uint64_t>(i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

EpochSampler::EpochSampler(int64_t numSamples, int64_t batchSize, uint64_t seed)
    : numSamples_(numSamples), batchSize_(batchSize), seed_(seed), batch_(batchSize) {}

const std::vector<int64_t>& EpochSampler::batch(int64_t step) {
  const int64_t perEpoch = batchesPerEpoch();
  const int64_t epoch = step / perEpoch, position = (step % perEpoch) * batchSize_;
  if (epoch != epoch_) {
    epoch_ = epoch;
    order_ = epochPermutation(numSamples_, seed_, epoch_);
  }
  std::copy(order_.begin() + position, order_.begin() + position + batchSize_, batch_.begin());
  return batch_;
}

void gatherRows(const io::NpyArray& array, const std::vector<int64_t>& indices, void* dst) {
  size_t rowBytes = array.rowBytes();
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t i = 0; i < indices.size(); ++i)
    std::memcpy(out + i * rowBytes, array.data() + static_cast<size_t>(indices[i]) * rowBytes,
                rowBytes);
}

void gatherRowRuns(const io::NpyArray& array, const std::vector<int64_t>& indices,
                   const std::vector<SequenceRun>& runs, int64_t length, void* dst) {
  const size_t rowBytes = array.rowBytes();
  const size_t positionBytes = rowBytes / static_cast<size_t>(length);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t index : indices) {
    const uint8_t* row = array.data() + static_cast<size_t>(index) * rowBytes;
    for (const SequenceRun& r : runs) {
      const size_t bytes = static_cast<size_t>(r.count) * positionBytes;
      std::memcpy(out, row + static_cast<size_t>(r.from) * positionBytes, bytes);
      out += bytes;
    }
  }
}

}  // namespace dtc::data
