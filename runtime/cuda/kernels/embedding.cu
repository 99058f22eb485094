// Embedding lookup and its gradient (cpu/kernels/embedding.cc and the split-table paths of
// cpu/cpu_transformer_table.cc). The gradient is deterministic without atomics: a stable radix
// sort groups the positions by id in increasing position order, then one block per id sums its
// positions' rows in that order, starting from 0 as the CPU does: the same bits.
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

uint64_t align256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

__global__ void lookup(const float* table, const int64_t* ids, float* out, int64_t n, int64_t vocab,
                       int64_t dim, int64_t offset, int64_t total, int* badId) {
  for (int64_t e = globalIndex(); e < n * dim; e += globalStride()) {
    const int64_t i = e / dim, c = e % dim, id = ids[i];
    const bool valid = id >= 0 && id < total;
    if (!valid && c == 0) *badId = 1;
    const int64_t local = id - offset;
    out[e] = valid && local >= 0 && local < vocab ? table[local * dim + c] : 0.0f;
  }
}

__global__ void checkAndNumber(const int64_t* ids, int64_t n, int64_t total, int* positions,
                               int* badId) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    positions[i] = static_cast<int>(i);
    if (ids[i] < 0 || ids[i] >= total) *badId = 1;
  }
}

// keys: the ids sorted; order: their positions. The block of a run's first key writes the row.
__global__ void sumRuns(const float* dy, const int64_t* keys, const int* order, int64_t n,
                        int64_t vocab, int64_t dim, int64_t offset, float* dtable) {
  for (int64_t k = blockIdx.x; k < n; k += gridDim.x) {
    const int64_t id = keys[k];
    if (k > 0 && keys[k - 1] == id) continue;
    const int64_t local = id - offset;
    if (local < 0 || local >= vocab) continue;  // another device's row, or an invalid id
    int64_t end = k + 1;
    while (end < n && keys[end] == id) ++end;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      float acc = 0.0f;
      for (int64_t m = k; m < end; ++m) acc += dy[static_cast<int64_t>(order[m]) * dim + c];
      dtable[local * dim + c] = acc;
    }
  }
}

size_t sortBytes(int64_t n) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int64_t*>(nullptr),
                                  static_cast<int64_t*>(nullptr), static_cast<const int*>(nullptr),
                                  static_cast<int*>(nullptr), static_cast<int>(n));
  return bytes;
}

}  // namespace

cudaError_t embedding(const float* table, const int64_t* ids, float* out, int64_t n, int64_t vocab,
                      int64_t dim, int64_t offset, int64_t total, int* badId, cudaStream_t stream) {
  if (n * dim > 0)
    lookup<<<blocksFor(n * dim), kThreads, 0, stream>>>(table, ids, out, n, vocab, dim, offset,
                                                        total, badId);
  return cudaGetLastError();
}

uint64_t embeddingGradScratchBytes(int64_t n, int64_t) {
  return align256(n * sizeof(int64_t)) + 2 * align256(n * sizeof(int)) + align256(sortBytes(n));
}

cudaError_t embeddingGrad(const float* dy, const int64_t* ids, float* dtable, int64_t n,
                          int64_t vocab, int64_t dim, int64_t offset, int64_t total, void* scratch,
                          uint64_t scratchBytes, int* badId, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(dtable, 0, vocab * dim * sizeof(float), stream);
  if (e != cudaSuccess || n == 0) return e;
  uint8_t* at = static_cast<uint8_t*>(scratch);
  int64_t* keys = reinterpret_cast<int64_t*>(at);
  at += align256(n * sizeof(int64_t));
  int* positions = reinterpret_cast<int*>(at);
  at += align256(n * sizeof(int));
  int* order = reinterpret_cast<int*>(at);
  at += align256(n * sizeof(int));
  size_t tempBytes = scratchBytes - (at - static_cast<uint8_t*>(scratch));
  checkAndNumber<<<blocksFor(n), kThreads, 0, stream>>>(ids, n, total, positions, badId);
  // All 64 bits: invalid (negative or too large) ids sort apart from valid ones too.
  e = cub::DeviceRadixSort::SortPairs(at, tempBytes, ids, keys, positions, order,
                                      static_cast<int>(n), 0, 64, stream);
  if (e != cudaSuccess) return e;
  if (dim > 0)
    sumRuns<<<static_cast<unsigned>(std::min<int64_t>(n, 65535)), rowThreads(dim), 0, stream>>>(
        dy, keys, order, n, vocab, dim, offset, dtable);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
