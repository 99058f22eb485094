// reduceSum over arbitrary axes. Sums accumulate in double and every partial-sum split depends
// only on the shape, never on the pool size, so results are identical for any thread count.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "cpu/kernels/kernels.h"

namespace dtc::cpu {
namespace {

constexpr int64_t kGrain = 16384;      // elements of work per parallel task, roughly
constexpr int64_t kColBlock = 512;     // output columns per task (4 KiB of double accumulators)
constexpr int64_t kMaxRowBlocks = 64;  // caps the partial-sum buffer of the [R,K] row split

struct Dim {
  int64_t size, stride;  // stride in elements of x
  bool reduced;
};

// Eight independent double chains: exact enough and ~8x the throughput of one serial chain.
double sumContiguous(const float* x, int64_t n) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; ++u) s[u] += x[j + u];
  for (; j < n; ++j) s[0] += x[j];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// Offsets of a row-major multi-index over `dims`, visited in order by next().
class Odometer {
 public:
  explicit Odometer(std::vector<Dim> dims) : dims_(std::move(dims)), idx_(dims_.size(), 0) {}
  int64_t count() const {
    int64_t n = 1;
    for (const Dim& d : dims_) n *= d.size;
    return n;
  }
  // Offset of the linear index `i`, without moving the odometer.
  int64_t offsetOf(int64_t i) const {
    int64_t off = 0;
    for (size_t d = dims_.size(); d-- > 0;) {
      off += (i % dims_[d].size) * dims_[d].stride;
      i /= dims_[d].size;
    }
    return off;
  }
  void reset() {
    std::fill(idx_.begin(), idx_.end(), 0);
    offset_ = 0;
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      offset_ += dims_[d].stride;
      if (++idx_[d] < dims_[d].size) return;
      offset_ -= dims_[d].stride * dims_[d].size;
      idx_[d] = 0;
    }
  }

 private:
  std::vector<Dim> dims_;
  std::vector<int64_t> idx_;
  int64_t offset_ = 0;
};

// x is [R] → one scalar: fixed-size blocks of partials, summed in order.
void sumAll(const float* x, int64_t n, float* out, ThreadPool& pool) {
  const int64_t blocks = (n + kGrain - 1) / kGrain;
  std::vector<double> partial(blocks);
  pool.parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      partial[b] = sumContiguous(x + b * kGrain, std::min(kGrain, n - b * kGrain));
  });
  double s = 0;
  for (double p : partial) s += p;
  out[0] = static_cast<float>(s);
}

// x is [R,K] → [K] with K narrow (the bias-gradient case): too few column blocks to occupy
// the pool, so split the rows instead, each block writing a [K] partial, then combine.
void sumLeadingRowSplit(const float* x, int64_t rows, int64_t cols, float* out, ThreadPool& pool) {
  const int64_t rowsPerBlockMin = std::max<int64_t>(1, kGrain / cols);
  const int64_t blocks = std::min(kMaxRowBlocks, (rows + rowsPerBlockMin - 1) / rowsPerBlockMin);
  const int64_t rowsPerBlock = (rows + blocks - 1) / blocks;
  std::vector<double> partial(blocks * cols, 0.0);  // [blocks, K]
  pool.parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      double* acc = partial.data() + b * cols;
      const int64_t rEnd = std::min(rows, (b + 1) * rowsPerBlock);
      for (int64_t r = b * rowsPerBlock; r < rEnd; ++r) {
        const float* row = x + r * cols;
        for (int64_t j = 0; j < cols; ++j) acc[j] += row[j];
      }
    }
  });
  pool.parallelFor(cols, kGrain / blocks + 1, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      double s = 0;
      for (int64_t b = 0; b < blocks; ++b) s += partial[b * cols + j];
      out[j] = static_cast<float>(s);
    }
  });
}

// Innermost dim kept (K contiguous in x and out): out[o, :] = Σ_q x[kept(o) + red(q), :].
// Tasks are (output row, column block) pairs; each streams contiguous row segments.
void sumKeptInner(const float* x, const std::vector<Dim>& keptOuter,
                  const std::vector<Dim>& reduced, int64_t cols, float* out, ThreadPool& pool) {
  const Odometer kept(keptOuter);
  const int64_t outRows = kept.count();
  const int64_t reduceCount = Odometer(reduced).count();
  const int64_t colBlocks = (cols + kColBlock - 1) / kColBlock;
  const int64_t work = reduceCount * std::min(cols, kColBlock);
  pool.parallelFor(outRows * colBlocks, std::max<int64_t>(1, kGrain / work),
                   [&](int64_t begin, int64_t end) {
                     Odometer red(reduced);
                     double acc[kColBlock];
                     for (int64_t t = begin; t < end; ++t) {
                       const int64_t o = t / colBlocks, j0 = (t % colBlocks) * kColBlock;
                       const int64_t width = std::min(kColBlock, cols - j0);
                       const float* base = x + kept.offsetOf(o) + j0;
                       std::fill(acc, acc + width, 0.0);
                       red.reset();
                       for (int64_t q = 0; q < reduceCount; ++q, red.next()) {
                         const float* row = base + red.offset();
                         for (int64_t j = 0; j < width; ++j) acc[j] += row[j];
                       }
                       float* dst = out + o * cols + j0;
                       for (int64_t j = 0; j < width; ++j) dst[j] = static_cast<float>(acc[j]);
                     }
                   });
}

// Innermost dim reduced (runs of `len` contiguous elements): each output element sums its
// runs over the outer reduced dims. Parallel over output elements.
void sumReducedInner(const float* x, const std::vector<Dim>& keptDims,
                     const std::vector<Dim>& reducedOuter, int64_t len, float* out,
                     ThreadPool& pool) {
  const Odometer kept(keptDims);
  const int64_t outCount = kept.count();
  const int64_t runs = Odometer(reducedOuter).count();
  pool.parallelFor(outCount, std::max<int64_t>(1, kGrain / (runs * len)),
                   [&](int64_t begin, int64_t end) {
                     Odometer red(reducedOuter);
                     for (int64_t o = begin; o < end; ++o) {
                       const float* base = x + kept.offsetOf(o);
                       double s = 0;
                       red.reset();
                       for (int64_t q = 0; q < runs; ++q, red.next())
                         s += sumContiguous(base + red.offset(), len);
                       out[o] = static_cast<float>(s);
                     }
                   });
}

}  // namespace

void reduceSum(const float* x, const Shape& xShape, const std::vector<int64_t>& axes, float* out,
               ThreadPool& pool) {
  const int rank = static_cast<int>(xShape.size());
  std::vector<bool> isReduced(rank, false);
  for (int64_t a : axes) {
    assert(a >= 0 && a < rank);
    isReduced[a] = true;
  }
  int64_t total = 1, outCount = 1;
  for (int d = 0; d < rank; ++d) {
    total *= xShape[d];
    if (!isReduced[d]) outCount *= xShape[d];
  }
  if (outCount == 0) return;
  if (total == 0) {  // reducing over an empty axis
    fill(out, outCount, 0.0f, pool);
    return;
  }

  // Drop size-1 dims and merge neighbours of the same kind: x is contiguous, so any run of
  // reduced (or kept) dims is a single strided dim. Built innermost-first.
  std::vector<Dim> dims;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t size = xShape[d];
    if (size != 1) {
      if (!dims.empty() && dims.back().reduced == isReduced[d])
        dims.back().size *= size;
      else
        dims.push_back({size, stride, isReduced[d]});
    }
    stride *= size;
  }
  std::reverse(dims.begin(), dims.end());

  const bool anyReduced =
      std::any_of(dims.begin(), dims.end(), [](const Dim& d) { return d.reduced; });
  if (!anyReduced) {  // only size-1 axes reduced: a copy
    if (out != x)
      pool.parallelFor(total, kGrain, [&](int64_t begin, int64_t end) {
        std::memcpy(out + begin, x + begin, (end - begin) * sizeof(float));
      });
    return;
  }
  if (dims.size() == 1) return sumAll(x, total, out, pool);

  const Dim inner = dims.back();
  std::vector<Dim> keptDims, reducedDims;
  for (size_t d = 0; d + 1 < dims.size(); ++d)
    (dims[d].reduced ? reducedDims : keptDims).push_back(dims[d]);
  if (inner.reduced) return sumReducedInner(x, keptDims, reducedDims, inner.size, out, pool);
  // [R,K] with fewer column blocks than a small pool could use: split rows instead.
  const int64_t colBlocks = (inner.size + kColBlock - 1) / kColBlock;
  if (dims.size() == 2 && colBlocks < 8 && total > 2 * kGrain)
    return sumLeadingRowSplit(x, dims[0].size, inner.size, out, pool);
  sumKeptInner(x, keptDims, reducedDims, inner.size, out, pool);
}

}  // namespace dtc::cpu
