// conv2d as im2col + GEMM, one sample per task (each task's GEMMs single-threaded).
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/kernels/conv_kernels.h"
#include "cpu/kernels/gemm.h"

namespace dtc::cpu {
namespace {

// Output columns xo whose input column xo·sw − pw + j lies inside [0, w): [lo, hi).
void validColumns(const ConvGeometry& g, int64_t j, int64_t ow, int64_t& lo, int64_t& hi) {
  // xo·sw ≥ pw − j  and  xo·sw ≤ w − 1 + pw − j
  const int64_t first = g.pw - j, last = g.w - 1 + g.pw - j;
  lo = first <= 0 ? 0 : (first + g.sw - 1) / g.sw;
  hi = last < 0 ? 0 : std::min(ow, last / g.sw + 1);
  if (hi < lo) hi = lo;
}

// col [C·kh·kw, oh·ow]: column p holds the receptive field of output pixel p (zeros for
// padding). Rows are filled a segment at a time: zeros, a (strided) copy, zeros.
void im2col(const float* x, float* col, const ConvGeometry& g) {
  const int64_t oh = g.oh(), ow = g.ow();
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float* row = col + ((c * g.kh + i) * g.kw + j) * oh * ow;
        int64_t lo, hi;
        validColumns(g, j, ow, lo, hi);
        for (int64_t y = 0; y < oh; ++y) {
          float* out = row + y * ow;
          const int64_t iy = y * g.sh - g.ph + i;
          if (iy < 0 || iy >= g.h) {
            std::fill(out, out + ow, 0.0f);
            continue;
          }
          const float* in = x + (c * g.h + iy) * g.w + lo * g.sw - g.pw + j;
          std::fill(out, out + lo, 0.0f);
          if (g.sw == 1)
            std::copy(in, in + (hi - lo), out + lo);
          else
            for (int64_t xo = lo; xo < hi; ++xo) out[xo] = in[(xo - lo) * g.sw];
          std::fill(out + hi, out + ow, 0.0f);
        }
      }
}

// The adjoint of im2col: dx[c, iy, ix] += col[...] over every field the pixel belongs to.
void col2im(const float* col, float* dx, const ConvGeometry& g) {
  const int64_t oh = g.oh(), ow = g.ow();
  std::memset(dx, 0, sizeof(float) * g.c * g.h * g.w);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float* row = col + ((c * g.kh + i) * g.kw + j) * oh * ow;
        int64_t lo, hi;
        validColumns(g, j, ow, lo, hi);
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t iy = y * g.sh - g.ph + i;
          if (iy < 0 || iy >= g.h) continue;
          float* out = dx + (c * g.h + iy) * g.w + lo * g.sw - g.pw + j;
          const float* in = row + y * ow;
          for (int64_t xo = lo; xo < hi; ++xo) out[(xo - lo) * g.sw] += in[xo];
        }
      }
}

}  // namespace

void conv2d(const float* x, const float* weight, float* y, const ConvGeometry& g,
            ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, p = g.oh() * g.ow();
  pool.parallelFor(g.n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> col(k * p);
    for (int64_t s = begin; s < end; ++s) {
      im2col(x + s * g.c * g.h * g.w, col.data(), g);
      // y[s] [O, p] = weight [O, k] · col [k, p]
      sgemm(weight, col.data(), y + s * g.o * p, g.o, p, k, false, false, k, p, p);
    }
  });
}

void conv2dGradInput(const float* dy, const float* weight, float* dx, const ConvGeometry& g,
                     ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, p = g.oh() * g.ow();
  pool.parallelFor(g.n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> col(k * p);
    for (int64_t s = begin; s < end; ++s) {
      // col [k, p] = weightᵀ [k, O] · dy[s] [O, p]
      sgemm(weight, dy + s * g.o * p, col.data(), k, p, g.o, true, false, k, p, p);
      col2im(col.data(), dx + s * g.c * g.h * g.w, g);
    }
  });
}

void conv2dGradWeight(const float* dy, const float* x, float* dweight, const ConvGeometry& g,
                      ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, p = g.oh() * g.ow();
  // Fixed groups of samples each produce a partial dweight; partials are added in group
  // order, so the sum does not depend on the thread count.
  const int64_t groups = std::min<int64_t>(g.n, 16);
  const int64_t perGroup = (g.n + groups - 1) / groups;
  std::vector<float> partial(groups * g.o * k, 0.0f);
  pool.parallelFor(groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> col(k * p), one(g.o * k);
    for (int64_t gi = begin; gi < end; ++gi) {
      float* acc = partial.data() + gi * g.o * k;
      for (int64_t s = gi * perGroup; s < std::min(g.n, (gi + 1) * perGroup); ++s) {
        im2col(x + s * g.c * g.h * g.w, col.data(), g);
        // [O, k] = dy[s] [O, p] · colᵀ [p, k]
        sgemm(dy + s * g.o * p, col.data(), one.data(), g.o, k, p, false, true, p, p, k);
        for (int64_t i = 0; i < g.o * k; ++i) acc[i] += one[i];
      }
    }
  });
  std::fill(dweight, dweight + g.o * k, 0.0f);
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t i = 0; i < g.o * k; ++i) dweight[i] += partial[gi * g.o * k + i];
}

}  // namespace dtc::cpu
