// Layout changes: transpose (any permutation), split and concat along an axis.
#include <cstring>

#include "cpu/transformer_kernels.h"

namespace dtc::cpu {

void transpose(const float* x, const Shape& xShape, const std::vector<int64_t>& perm, float* out,
               ThreadPool& pool) {
  const size_t rank = xShape.size();
  Shape outShape(rank), inStrides(rank), permStrides(rank);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    inStrides[d] = stride;
    stride *= xShape[d];
  }
  for (size_t d = 0; d < rank; ++d) {
    outShape[d] = xShape[perm[d]];
    permStrides[d] = inStrides[perm[d]];  // input stride of output dimension d
  }
  const int64_t total = numElements(xShape);
  if (total == 0) return;
  if (rank == 0) {
    out[0] = x[0];
    return;
  }
  // Rows of the output's last dimension are the unit of work: each row walks the input with
  // one stride, and copying is contiguous when the last dimension stays in place.
  const int64_t inner = rank ? outShape[rank - 1] : 1;
  const int64_t innerStride = rank ? permStrides[rank - 1] : 1;
  const int64_t rows = total / inner;
  pool.parallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                   [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(rank, 0);
    for (int64_t r = begin; r < end; ++r) {
      // Decompose r over the output's leading dimensions.
      int64_t rem = r, offset = 0;
      for (size_t d = rank - 1; d-- > 0;) {
        offset += (rem % outShape[d]) * permStrides[d];
        rem /= outShape[d];
      }
      float* dst = out + r * inner;
      const float* src = x + offset;
      if (innerStride == 1) {
        std::memcpy(dst, src, inner * sizeof(float));
      } else {
        for (int64_t j = 0; j < inner; ++j) dst[j] = src[j * innerStride];
      }
    }
  });
}

namespace {

// Views a tensor as [outer, axisSize, inner] around `axis`.
void around(const Shape& shape, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
}

}  // namespace

void split(const float* x, const Shape& xShape, int64_t axis, const std::vector<float*>& outs,
           ThreadPool& pool) {
  int64_t outer, inner;
  around(xShape, axis, outer, inner);
  const int64_t parts = static_cast<int64_t>(outs.size());
  const int64_t piece = xShape[axis] / parts * inner;  // contiguous floats per piece per row
  pool.parallelFor(outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(piece * parts, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      for (int64_t p = 0; p < parts; ++p)
        std::memcpy(outs[p] + o * piece, x + (o * parts + p) * piece, piece * sizeof(float));
  });
}

void concat(const std::vector<const float*>& parts, const Shape& outShape, int64_t axis,
            float* out, ThreadPool& pool) {
  int64_t outer, inner;
  around(outShape, axis, outer, inner);
  const int64_t n = static_cast<int64_t>(parts.size());
  const int64_t piece = outShape[axis] / n * inner;
  pool.parallelFor(outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(piece * n, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      for (int64_t p = 0; p < n; ++p)
        std::memcpy(out + (o * n + p) * piece, parts[p] + o * piece, piece * sizeof(float));
  });
}

}  // namespace dtc::cpu
