// Layout changes: transpose (any permutation, rank <= 8), split and concat along an axis.
// Pure copies, so every path is exact and the results do not depend on the pool size.
#include <algorithm>
#include <cassert>
#include <cstring>

#include "cpu/kernels/transformer_kernels.h"

namespace dtc::cpu {
namespace {

constexpr int kMaxRank = 8;
// Floats copied per parallel task; below this the pool's hand-off costs more than the copy.
constexpr int64_t kGrainFloats = 16384;

int64_t rowsPerTask(int64_t floatsPerRow) {
  return std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(floatsPerRow, 1));
}

// [B,T,H,D] -> [B,H,T,D] (or back; the swap is its own inverse): attention's head split and
// merge. Every output row of D floats is one contiguous input row, so it is all memcpy with no
// per-row index arithmetic.
void swapAxes12(const float* x, int64_t b, int64_t t, int64_t h, int64_t d, float* out,
                ThreadPool& pool) {
  // x is [b, t, h, d], out is [b, h, t, d]; a task owns whole (batch, head) planes of out.
  pool.parallelFor(b * h, rowsPerTask(t * d), [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t bi = bh / h, hi = bh % h;
      const float* src = x + (bi * t * h + hi) * d;
      float* dst = out + bh * t * d;
      for (int64_t ti = 0; ti < t; ++ti)
        std::memcpy(dst + ti * d, src + ti * h * d, d * sizeof(float));
    }
  });
}

// Views a tensor as [outer, shape[axis], inner] around `axis`.
void around(const Shape& shape, int64_t axis, int64_t& outer, int64_t& inner) {
  assert(axis >= 0 && axis < static_cast<int64_t>(shape.size()));
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
}

}  // namespace

void transpose(const float* x, const Shape& xShape, const std::vector<int64_t>& perm, float* out,
               ThreadPool& pool) {
  const int rank = static_cast<int>(xShape.size());
  assert(rank <= kMaxRank && perm.size() == xShape.size());
  const int64_t total = numElements(xShape);
  if (total == 0) return;
  bool identity = true;
  for (int d = 0; d < rank; ++d) identity = identity && perm[d] == d;
  if (identity) {  // includes rank 0
    std::memcpy(out, x, total * sizeof(float));
    return;
  }
  if (rank == 4 && perm[0] == 0 && perm[1] == 2 && perm[2] == 1 && perm[3] == 3)
    return swapAxes12(x, xShape[0], xShape[1], xShape[2], xShape[3], out, pool);

  int64_t outShape[kMaxRank], srcStride[kMaxRank];  // srcStride[d]: input stride of out dim d
  int64_t inStrides[kMaxRank];
  int64_t stride = 1;
  for (int d = rank; d-- > 0;) {
    inStrides[d] = stride;
    stride *= xShape[d];
  }
  for (int d = 0; d < rank; ++d) {
    outShape[d] = xShape[perm[d]];
    srcStride[d] = inStrides[perm[d]];
  }
  // The unit of work is a row of the output's last dimension: one strided read (contiguous when
  // the last dimension stays last) into one contiguous write.
  const int64_t inner = outShape[rank - 1];
  const int64_t innerStride = srcStride[rank - 1];
  const int64_t rows = total / inner;
  const int lead = rank - 1;  // leading output dimensions that index the rows
  pool.parallelFor(rows, rowsPerTask(inner), [&](int64_t begin, int64_t end) {
    // Decompose the first row once, then step the index like an odometer: no divisions per row.
    int64_t index[kMaxRank] = {0};
    int64_t offset = 0;
    for (int64_t d = lead - 1, rem = begin; d >= 0; --d) {
      index[d] = rem % outShape[d];
      rem /= outShape[d];
      offset += index[d] * srcStride[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      float* dst = out + r * inner;
      const float* src = x + offset;
      if (innerStride == 1) {
        std::memcpy(dst, src, inner * sizeof(float));
      } else {
        for (int64_t j = 0; j < inner; ++j) dst[j] = src[j * innerStride];
      }
      for (int d = lead - 1; d >= 0; --d) {
        offset += srcStride[d];
        if (++index[d] < outShape[d]) break;
        offset -= index[d] * srcStride[d];
        index[d] = 0;
      }
    }
  });
}

void splitBytes(const uint8_t* x, const Shape& xShape, int64_t axis,
                const std::vector<int64_t>& sizes, const std::vector<uint8_t*>& outs,
                size_t element, ThreadPool& pool) {
  if (outs.empty() || numElements(xShape) == 0) return;
  int64_t outer, inner;
  around(xShape, axis, outer, inner);
  // x is [outer, xShape[axis] · inner] elements; part p is [outer, sizes[p] · inner], starting
  // at the sum of the sizes before it. With axis the last dimension (QKV split), inner is 1 and
  // a piece is one block of a row.
  const int64_t row = xShape[axis] * inner;
  pool.parallelFor(outer, rowsPerTask(row), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const uint8_t* src = x + o * row * element;
      for (size_t p = 0; p < outs.size(); ++p) {
        const int64_t width = sizes[p] * inner;
        std::memcpy(outs[p] + o * width * element, src, width * element);
        src += width * element;
      }
    }
  });
}

void split(const float* x, const Shape& xShape, int64_t axis, const std::vector<int64_t>& sizes,
           const std::vector<float*>& outs, ThreadPool& pool) {
  std::vector<uint8_t*> bytes;
  for (float* out : outs) bytes.push_back(reinterpret_cast<uint8_t*>(out));
  splitBytes(reinterpret_cast<const uint8_t*>(x), xShape, axis, sizes, bytes, sizeof(float), pool);
}

void concat(const std::vector<const float*>& parts, const std::vector<int64_t>& sizes,
            const Shape& outShape, int64_t axis, float* out, ThreadPool& pool) {
  if (parts.empty() || numElements(outShape) == 0) return;
  int64_t outer, inner;
  around(outShape, axis, outer, inner);
  const int64_t row = outShape[axis] * inner;
  pool.parallelFor(outer, rowsPerTask(row), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      float* dst = out + o * row;
      for (size_t p = 0; p < parts.size(); ++p) {
        const int64_t width = sizes[p] * inner;
        std::memcpy(dst, parts[p] + o * width, width * sizeof(float));
        dst += width;
      }
    }
  });
}

}  // namespace dtc::cpu
