// Embedding lookup and its scatter-add gradient.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"

namespace dtc::cpu {
namespace {

// Floats written per parallel task.
constexpr int64_t kGrainFloats = 16384;

int64_t rowsPerTask(int64_t dim) {
  return std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(dim, 1));
}

}  // namespace

bool embedding(const float* table, const int64_t* ids, float* out, int64_t n, int64_t vocab,
               int64_t dim, ThreadPool& pool) {
  // table: [vocab, dim]; ids: [n]; out: [n, dim]. Check every id before copying anything, so a
  // bad id cannot be read out of bounds by a task that runs ahead.
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab) return false;
  pool.parallelFor(n, rowsPerTask(dim), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(out + i * dim, table + ids[i] * dim, dim * sizeof(float));
  });
  return true;
}

void embeddingGrad(const float* dy, const int64_t* ids, float* dtable, int64_t n, int64_t vocab,
                   int64_t dim, ThreadPool& pool) {
  // dy: [n, dim]; ids: [n]; dtable: [vocab, dim].
  // Bucket the positions by id (a counting sort, stable), then let each task own a range of
  // vocabulary rows: a row is zeroed and then receives its positions' gradients in increasing
  // position order — the same order as a serial loop, so the result is bit-identical for any
  // thread count, with no float atomics and no races. Zeroing in the same pass touches every
  // row of the (possibly large) table once, on all threads.
  std::vector<int64_t> start(static_cast<size_t>(vocab) + 1, 0);  // [vocab + 1] bucket offsets
  for (int64_t i = 0; i < n; ++i) {
    assert(ids[i] >= 0 && ids[i] < vocab);
    ++start[ids[i] + 1];
  }
  for (int64_t v = 0; v < vocab; ++v) start[v + 1] += start[v];
  std::vector<int64_t> order(static_cast<size_t>(n));  // [n] positions grouped by id
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[next[ids[i]]++] = i;
  }
  pool.parallelFor(vocab, rowsPerTask(dim), [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      float* row = dtable + v * dim;
      std::fill(row, row + dim, 0.0f);
      for (int64_t k = start[v]; k < start[v + 1]; ++k) {
        const float* g = dy + order[k] * dim;
        for (int64_t j = 0; j < dim; ++j) row[j] += g[j];
      }
    }
  });
}

}  // namespace dtc::cpu
