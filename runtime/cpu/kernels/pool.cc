// Max-pooling over NCHW windows (no padding) and its gradient.
#include <cstring>

#include "cpu/kernels/conv_kernels.h"

namespace dtc::cpu {
namespace {

// Offset (within one [H, W] plane) of the first maximum of output pixel (y, x)'s window.
int64_t argmaxInWindow(const float* plane, const PoolGeometry& g, int64_t y, int64_t x) {
  int64_t best = (y * g.sh) * g.w + x * g.sw;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      int64_t at = (y * g.sh + i) * g.w + x * g.sw + j;
      if (plane[at] > plane[best]) best = at;
    }
  return best;
}

}  // namespace

void maxPool2d(const float* x, float* y, const PoolGeometry& g, ThreadPool& pool) {
  const int64_t oh = g.oh(), ow = g.ow();
  pool.parallelFor(g.n * g.c, 8, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float* in = x + plane * g.h * g.w;
      float* out = y + plane * oh * ow;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) out[i * ow + j] = in[argmaxInWindow(in, g, i, j)];
    }
  });
}

void maxPool2dGrad(const float* dy, const float* x, float* dx, const PoolGeometry& g,
                   ThreadPool& pool) {
  const int64_t oh = g.oh(), ow = g.ow();
  pool.parallelFor(g.n * g.c, 8, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float* in = x + plane * g.h * g.w;
      float* out = dx + plane * g.h * g.w;
      std::memset(out, 0, sizeof(float) * g.h * g.w);
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          out[argmaxInWindow(in, g, i, j)] += dy[plane * oh * ow + i * ow + j];
    }
  });
}

}  // namespace dtc::cpu
