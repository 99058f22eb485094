// Max-pooling over NCHW windows (no padding) and its gradient. The first maximum of a window
// wins ties (as PyTorch's CPU kernel).
#include <algorithm>
#include <cstring>

#include "cpu/kernels/conv_kernels.h"

namespace dtc::cpu {
namespace {

// Offset (within one [H, W] plane) of the first maximum of output pixel (y, x)'s window.
int64_t argmaxInWindow(const float* plane, const PoolGeometry& g, int64_t y, int64_t x) {
  int64_t best = (y * g.sh) * g.w + x * g.sw;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t at = (y * g.sh + i) * g.w + x * g.sw + j;
      best = plane[at] > plane[best] ? at : best;
    }
  return best;
}

bool isTwoByTwo(const PoolGeometry& g) { return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2; }

// The 2×2, stride-2 window (PyTorch's MaxPool2d(2)): the strict-greater chain that makes the
// first maximum win. A NaN can only be picked first (nothing compares greater than a kept
// NaN, and a later NaN never compares greater).
inline float maxOfFour(float a, float b, float c, float d) {
  float best = a;
  best = b > best ? b : best;
  best = c > best ? c : best;
  return d > best ? d : best;
}

void maxPoolTwoByTwo(const float* in, float* out, const PoolGeometry& g) {
  const int64_t oh = g.oh(), ow = g.ow();
  for (int64_t i = 0; i < oh; ++i) {
    const float* top = in + 2 * i * g.w;
    const float* bottom = top + g.w;
    float* row = out + i * ow;
    for (int64_t j = 0; j < ow; ++j) {
      row[j] = maxOfFour(top[2 * j], top[2 * j + 1], bottom[2 * j], bottom[2 * j + 1]);
    }
  }
}

// Every input pixel lies in at most one window: the gradient is written, window by window.
void maxPoolTwoByTwoGrad(const float* dy, const float* in, float* dx, const PoolGeometry& g) {
  const int64_t oh = g.oh(), ow = g.ow();
  if (g.h != 2 * oh || g.w != 2 * ow) std::memset(dx, 0, sizeof(float) * g.h * g.w);
  for (int64_t i = 0; i < oh; ++i) {
    const float* top = in + 2 * i * g.w;
    const float* bottom = top + g.w;
    float* dtop = dx + 2 * i * g.w;
    float* dbottom = dtop + g.w;
    const float* grad = dy + i * ow;
    for (int64_t j = 0; j < ow; ++j) {
      const float a = top[2 * j], b = top[2 * j + 1], c = bottom[2 * j], d = bottom[2 * j + 1];
      const float best = maxOfFour(a, b, c, d);
      // The first pixel equal to the maximum (or a NaN in the first place, which the chain
      // keeps); bitwise logic, not branches, so the loop vectorises.
      const bool pickA = (a == best) | (a != a);
      const bool pickB = !pickA & (b == best);
      const bool pickC = !pickA & !pickB & (c == best);
      const bool pickD = !pickA & !pickB & !pickC;
      const float gradient = grad[j];
      dtop[2 * j] = pickA ? gradient : 0.0f;
      dtop[2 * j + 1] = pickB ? gradient : 0.0f;
      dbottom[2 * j] = pickC ? gradient : 0.0f;
      dbottom[2 * j + 1] = pickD ? gradient : 0.0f;
    }
  }
}

}  // namespace

void maxPool2d(const float* x, float* y, const PoolGeometry& g, ThreadPool& pool) {
  const int64_t oh = g.oh(), ow = g.ow();
  pool.parallelFor(g.n * g.c, 8, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float* in = x + plane * g.h * g.w;
      float* out = y + plane * oh * ow;
      if (isTwoByTwo(g)) {
        maxPoolTwoByTwo(in, out, g);
        continue;
      }
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
      const float* grad = dy + plane * oh * ow;
      if (isTwoByTwo(g)) {
        maxPoolTwoByTwoGrad(grad, in, out, g);
        continue;
      }
      std::memset(out, 0, sizeof(float) * g.h * g.w);
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) out[argmaxInWindow(in, g, i, j)] += grad[i * ow + j];
    }
  });
}

}  // namespace dtc::cpu
