#include "ops/cuda_scratch.h"

#include <algorithm>
#include <cstdint>

namespace dtc::cuda::kernels {
namespace {

// reduce_sum: the split of each sum into chunks (one block each, partial sums in double, added in
// chunk order), bounded so the partials stay within kMaxPartials doubles.
constexpr int64_t kChunkElements = 32768;  // elements per block and chunk of a contiguous sum
constexpr int64_t kChunkRows = 64;         // rows per chunk of a column sum
constexpr int64_t kMaxChunks = 1024;
constexpr int64_t kMaxPartials = int64_t{1} << 23;  // 64 MiB of doubles

int64_t reduceChunks(int64_t work, int64_t perChunk, int64_t outputs) {
  int64_t chunks = std::min(kMaxChunks, std::max<int64_t>(1, (work + perChunk - 1) / perChunk));
  return std::max<int64_t>(1, std::min(chunks, kMaxPartials / std::max<int64_t>(outputs, 1)));
}

constexpr uint64_t kSaturated = UINT64_MAX;

}  // namespace

uint64_t ReducePlan::scratchBytes() const {
  return chunks > 1 ? static_cast<uint64_t>(chunks * outputs) * sizeof(double) : 0;
}

bool makeReducePlan(const std::vector<int64_t>& x, const std::vector<int64_t>& axes,
                    ReducePlan& plan) {
  const int rank = static_cast<int>(x.size());
  std::vector<bool> isReduced(rank, false);
  for (int64_t a : axes) isReduced[a] = true;
  plan = ReducePlan();
  plan.total = 1;
  plan.outputs = 1;
  for (int d = 0; d < rank; ++d) {
    plan.total *= x[d];
    if (!isReduced[d]) plan.outputs *= x[d];
  }
  if (plan.outputs == 0) return true;  // kEmpty
  if (plan.total == 0) {
    plan.kind = ReducePlan::kZeros;
    return true;
  }
  // Size-1 dimensions dropped, runs of the same kind merged (x is contiguous), innermost first.
  struct Dim {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Dim> dims;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (x[d] != 1) {
      if (!dims.empty() && dims.back().reduced == isReduced[d])
        dims.back().size *= x[d];
      else
        dims.push_back({x[d], stride, static_cast<bool>(isReduced[d])});
    }
    stride *= x[d];
  }
  if (std::none_of(dims.begin(), dims.end(), [](const Dim& d) { return d.reduced; })) {
    plan.kind = ReducePlan::kCopy;
    return true;
  }
  const Dim inner = dims.front();
  for (size_t i = dims.size(); i-- > 1;) {  // outer dimensions, outermost first
    Dims& into = dims[i].reduced ? plan.reduced : plan.kept;
    if (into.rank == kMaxDims) return false;
    into.size[into.rank] = dims[i].size;
    into.stride[into.rank++] = dims[i].stride;
  }
  plan.inner = inner.size;
  if (inner.reduced) {
    plan.kind = ReducePlan::kInnerReduced;
    plan.chunks = reduceChunks(count(plan.reduced) * inner.size, kChunkElements, plan.outputs);
  } else {
    plan.kind = ReducePlan::kInnerKept;
    plan.chunks = reduceChunks(count(plan.reduced), kChunkRows, plan.outputs);
  }
  return true;
}

int64_t layerNormGradChunks(int64_t rows) {
  constexpr int64_t kRowsPerChunk = 64, kMaxRowChunks = 1024;
  return std::max<int64_t>(1, std::min(kMaxRowChunks, (rows + kRowsPerChunk - 1) / kRowsPerChunk));
}

uint64_t layerNormGradScratchBytes(int64_t rows, int64_t c) {
  return static_cast<uint64_t>(layerNormGradChunks(rows) * 2 * c) * sizeof(double);
}

uint64_t columnSumScratchBytes(int64_t rows, int64_t n) {
  return static_cast<uint64_t>(layerNormGradChunks(rows) * std::max<int64_t>(n, 0)) *
         sizeof(double);
}

uint64_t embeddingGradScratchBound(int64_t n) {
  const uint64_t items = static_cast<uint64_t>(std::max<int64_t>(n, 0));
  // The binder's keys (int64), positions and order (int), then CUB's storage: alternate keys
  // and values (12 bytes an item), look-back state (at most 4 bytes an item: tiles hold more than
  // 256 items, 256 digits of 4 bytes each) and 64 KiB for histograms, counters and alignment.
  return alignPiece(items * sizeof(int64_t)) + 2 * alignPiece(items * sizeof(int)) +
         alignPiece(items * 16 + (uint64_t{64} << 10));
}

uint64_t causalAttentionGradScratchBytes(int64_t slices, int64_t t) {
  return static_cast<uint64_t>(std::max<int64_t>(slices * t, 0)) * sizeof(float);
}

ScoresLayout scoresLayout(uint64_t elements, bool grad) {
  ScoresLayout l;
  if (elements > (kSaturated >> 5)) {
    l.bytes = kSaturated;
    return l;
  }
  const uint64_t wide = alignPiece(elements * sizeof(float)), narrow = alignPiece(elements * 2);
  l.s = 0;
  l.dp = grad ? wide : 0;
  l.p = (grad ? 2 : 1) * wide;
  l.ds = grad ? l.p + narrow : 0;
  l.bytes = l.p + (grad ? 2 : 1) * narrow;
  return l;
}

uint64_t scoreElements(int64_t slices, int64_t t) {
  if (slices <= 0 || t <= 0) return 0;
  const uint64_t rows = static_cast<uint64_t>(slices) * static_cast<uint64_t>(t);
  const uint64_t columns = static_cast<uint64_t>(t);
  return rows > kSaturated / columns ? kSaturated : rows * columns;
}

uint64_t attentionScratchBytes(int64_t slices, int64_t t, bool lowPrecision, bool grad) {
  uint64_t bytes = grad ? causalAttentionGradScratchBytes(slices, t) : 0;
  if (lowPrecision) {
    const uint64_t gemm = scoresLayout(scoreElements(slices, t), grad).bytes;
    if (gemm <= kGemmScratchBudget) bytes = std::max(bytes, gemm);
  }
  return bytes;
}

uint64_t cudnnAttentionWorkspaceBound(int64_t batch, int64_t heads, int64_t t, int64_t d, bool grad,
                                      int64_t kvHeads) {
  if (!grad || batch <= 0 || heads <= 0 || t <= 0 || d <= 0) return 0;
  const auto roundUp = [](uint64_t n, uint64_t m) { return (n + m - 1) / m * m; };
  const uint64_t rows = static_cast<uint64_t>(batch) * static_cast<uint64_t>(heads) *
                        roundUp(static_cast<uint64_t>(t), 128);
  const uint64_t width = roundUp(std::max<uint64_t>(static_cast<uint64_t>(d), 64), 64);
  const uint64_t grouped = kvHeads > 0 && kvHeads < heads ? 3 : 1;
  return grouped * rows * width * sizeof(float) + 2 * rows * sizeof(float) + 4096;
}

ConvScratch convScratch(int64_t n, int64_t k, int64_t p, int64_t o, bool gradWeight) {
  ConvScratch s;
  s.col = 0;
  const uint64_t col = static_cast<uint64_t>(n * k * p) * sizeof(float);
  s.parts = alignPiece(col);
  s.bytes = gradWeight ? s.parts + static_cast<uint64_t>(n * o * k) * sizeof(float) : col;
  return s;
}

}  // namespace dtc::cuda::kernels
