// conv2d as im2col + GEMM, one sample per task (each task's GEMMs single-threaded).
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/conv_kernels.h"

namespace dtc::cpu {
namespace {

// col [C·kh·kw, oh·ow]: column p holds the receptive field of output pixel p (zeros for padding).
void im2col(const float* x, float* col, const ConvGeometry& g) {
  const int64_t oh = g.oh(), ow = g.ow();
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float* row = col + ((c * g.kh + i) * g.kw + j) * oh * ow;
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t iy = y * g.sh - g.ph + i;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t ix = xo * g.sw - g.pw + j;
            row[y * ow + xo] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                                   ? x[(c * g.h + iy) * g.w + ix]
                                   : 0.0f;
          }
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
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t iy = y * g.sh - g.ph + i;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t ix = xo * g.sw - g.pw + j;
            if (ix >= 0 && ix < g.w) dx[(c * g.h + iy) * g.w + ix] += row[y * ow + xo];
          }
        }
      }
}

}  // namespace

void conv2d(const float* x, const float* weight, float* y, const ConvGeometry& g, ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, p = g.oh() * g.ow();
  pool.parallelFor(g.n, 1, [&](int64_t begin, int64_t end) {
    ThreadPool serial(1);
    std::vector<float> col(k * p);
    for (int64_t s = begin; s < end; ++s) {
      im2col(x + s * g.c * g.h * g.w, col.data(), g);
      // y[s] [O, p] = weight [O, k] · col [k, p]
      matmul(weight, col.data(), y + s * g.o * p, g.o, p, k, false, false, serial);
    }
  });
}

void conv2dGradInput(const float* dy, const float* weight, float* dx, const ConvGeometry& g,
                     ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, p = g.oh() * g.ow();
  pool.parallelFor(g.n, 1, [&](int64_t begin, int64_t end) {
    ThreadPool serial(1);
    std::vector<float> col(k * p);
    for (int64_t s = begin; s < end; ++s) {
      // col [k, p] = weightᵀ [k, O] · dy[s] [O, p]
      matmul(weight, dy + s * g.o * p, col.data(), k, p, g.o, true, false, serial);
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
    ThreadPool serial(1);
    std::vector<float> col(k * p), one(g.o * k);
    for (int64_t gi = begin; gi < end; ++gi) {
      float* acc = partial.data() + gi * g.o * k;
      for (int64_t s = gi * perGroup; s < std::min(g.n, (gi + 1) * perGroup); ++s) {
        im2col(x + s * g.c * g.h * g.w, col.data(), g);
        // [O, k] = dy[s] [O, p] · colᵀ [p, k]
        matmul(dy + s * g.o * p, col.data(), one.data(), g.o, k, p, false, true, serial);
        for (int64_t i = 0; i < g.o * k; ++i) acc[i] += one[i];
      }
    }
  });
  std::fill(dweight, dweight + g.o * k, 0.0f);
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t i = 0; i < g.o * k; ++i) dweight[i] += partial[gi * g.o * k + i];
}

}  // namespace dtc::cpu
