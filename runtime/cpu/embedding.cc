// Embedding lookup and its scatter-add gradient.
#include <cstring>

#include "cpu/transformer_kernels.h"

namespace dtc::cpu {

bool embedding(const float* table, const int64_t* ids, float* out, int64_t n, int64_t vocab,
               int64_t dim, ThreadPool& pool) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab) return false;
  pool.parallelFor(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(out + i * dim, table + ids[i] * dim, dim * sizeof(float));
  });
  return true;
}

void embeddingGrad(const float* dy, const int64_t* ids, float* dtable, int64_t n, int64_t vocab,
                   int64_t dim, ThreadPool& pool) {
  std::memset(dtable, 0, static_cast<size_t>(vocab) * dim * sizeof(float));
  // Threads own disjoint column ranges and visit the rows in order, so every entry is summed
  // in the same order whatever the thread count (no float atomics, no races).
  pool.parallelFor(dim, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < n; ++i) {
      float* row = dtable + ids[i] * dim;
      const float* g = dy + i * dim;
      for (int64_t j = begin; j < end; ++j) row[j] += g[j];
    }
  });
}

}  // namespace dtc::cpu
