// conv2d as im2col + GEMM. The input is zero-padded once per sample, so unrolling a kernel tap
// is a plain strided copy with no bounds logic; a task lays several samples' columns side by
// side, so each GEMM is wide (and the weight packed once for all of them).
#include <algorithm>
#include <vector>

#include "cpu/kernels/conv_kernels.h"
#include "cpu/kernels/gemm.h"

namespace dtc::cpu {
namespace {

// Output pixels a task puts in one GEMM: enough to amortise packing the weight and fill the
// GEMM's column blocks, few enough that the unrolled columns stay a few MiB.
constexpr int64_t kColumnsPerGemm = 2048;

int64_t samplesPerGemm(const ConvGeometry& g) {
  return std::max<int64_t>(1, kColumnsPerGemm / (g.oh() * g.ow()));
}

// A buffer each thread keeps between calls: the unrolled columns are megabytes, and taking
// fresh pages for them every step costs more than the copies.
float* scratch(std::vector<float>& buffer, int64_t size) {
  if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(size);
  return buffer.data();
}

struct Padded {
  int64_t h, w;
  explicit Padded(const ConvGeometry& g) : h(g.h + 2 * g.ph), w(g.w + 2 * g.pw) {}
  int64_t size(const ConvGeometry& g) const { return g.c * h * w; }
};

// xp [C, H + 2ph, W + 2pw] = x [C, H, W] inside a zero border.
void pad(const float* x, float* xp, const ConvGeometry& g, const Padded& p) {
  std::fill(xp, xp + p.size(g), 0.0f);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t y = 0; y < g.h; ++y)
      std::copy(x + (c * g.h + y) * g.w, x + (c * g.h + y + 1) * g.w,
                xp + (c * p.h + y + g.ph) * p.w + g.pw);
}

// dx [C, H, W] = the inside of the padded gradient.
void unpad(const float* dxp, float* dx, const ConvGeometry& g, const Padded& p) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t y = 0; y < g.h; ++y) {
      const float* row = dxp + (c * p.h + y + g.ph) * p.w + g.pw;
      std::copy(row, row + g.w, dx + (c * g.h + y) * g.w);
    }
}

// GCC turns the short row loops below into memcpy/memset calls (a call per 14-float row) unless
// told not to; the loops themselves vectorise.
#if defined(__GNUC__) && !defined(__clang__)
#define DTC_NO_LIBC_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define DTC_NO_LIBC_LOOPS
#endif

// col [C·kh·kw, ld]: row (c, i, j) holds, in its first oh·ow columns, tap (i, j) of channel c
// for every output pixel.
DTC_NO_LIBC_LOOPS void im2col(const float* xp, float* col, int64_t ld, const ConvGeometry& g,
                              const Padded& p) {
  const int64_t oh = g.oh(), ow = g.ow();
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float* row = col + ((c * g.kh + i) * g.kw + j) * ld;
        for (int64_t y = 0; y < oh; ++y) {
          const float* in = xp + (c * p.h + y * g.sh + i) * p.w + j;
          float* out = row + y * ow;
          if (g.sw == 1)
            for (int64_t x = 0; x < ow; ++x) out[x] = in[x];
          else
            for (int64_t x = 0; x < ow; ++x) out[x] = in[x * g.sw];
        }
      }
}

// The adjoint of im2col into the padded gradient: dxp += every tap's column, in (c, i, j, y)
// order.
DTC_NO_LIBC_LOOPS void col2im(const float* col, int64_t ld, float* dxp, const ConvGeometry& g,
                              const Padded& p) {
  const int64_t oh = g.oh(), ow = g.ow();
  std::fill(dxp, dxp + p.size(g), 0.0f);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float* row = col + ((c * g.kh + i) * g.kw + j) * ld;
        for (int64_t y = 0; y < oh; ++y) {
          float* out = dxp + (c * p.h + y * g.sh + i) * p.w + j;
          const float* in = row + y * ow;
          if (g.sw == 1)
            for (int64_t x = 0; x < ow; ++x) out[x] += in[x];
          else
            for (int64_t x = 0; x < ow; ++x) out[x * g.sw] += in[x];
        }
      }
}

// Samples [begin, end) in GEMM-sized runs: fn(first, count).
template <typename Fn>
void inRuns(int64_t begin, int64_t end, int64_t run, Fn&& fn) {
  for (int64_t s = begin; s < end; s += run) fn(s, std::min(run, end - s));
}

// Runs of `run` samples from sample 0 on, spread over the pool: which samples share a GEMM
// does not depend on the thread count, nor then do the results.
template <typename Fn>
void forEachRun(int64_t n, int64_t run, ThreadPool& pool, Fn&& fn) {
  pool.parallelFor((n + run - 1) / run, 1, [&](int64_t begin, int64_t end) {
    inRuns(begin * run, std::min(n, end * run), run, fn);
  });
}

// This thread's scratch for a run of `run` samples: the unrolled columns [k, run·pixels], a
// matrix [O, run·pixels] of the run's outputs or output gradients side by side, `extra` floats,
// and one padded sample.
struct RunScratch {
  int64_t ld;  // run·pixels: the row length of the columns and of the wide matrix
  float* columns;
  float* wide;
  float* extra;
  float* padded;
};

RunScratch runScratch(const ConvGeometry& g, const Padded& p, int64_t run, int64_t extra = 0) {
  thread_local std::vector<float> buffer;
  const int64_t k = g.c * g.kh * g.kw, ld = run * g.oh() * g.ow();
  float* base = scratch(buffer, k * ld + g.o * ld + extra + p.size(g));
  return {ld, base, base + k * ld, base + k * ld + g.o * ld, base + k * ld + g.o * ld + extra};
}

// wide [O, ld] columns s·pixels.. ← planes [count, O, pixels], and back.
void toWide(const float* planes, float* wide, const ConvGeometry& g, int64_t count, int64_t ld) {
  const int64_t pixels = g.oh() * g.ow();
  for (int64_t s = 0; s < count; ++s)
    for (int64_t o = 0; o < g.o; ++o)
      std::copy(planes + (s * g.o + o) * pixels, planes + (s * g.o + o + 1) * pixels,
                wide + o * ld + s * pixels);
}

void fromWide(const float* wide, float* planes, const ConvGeometry& g, int64_t count, int64_t ld) {
  const int64_t pixels = g.oh() * g.ow();
  for (int64_t s = 0; s < count; ++s)
    for (int64_t o = 0; o < g.o; ++o)
      std::copy(wide + o * ld + s * pixels, wide + o * ld + (s + 1) * pixels,
                planes + (s * g.o + o) * pixels);
}

}  // namespace

void conv2d(const float* x, const float* weight, float* y, const ConvGeometry& g,
            ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, pixels = g.oh() * g.ow(), run = samplesPerGemm(g);
  const Padded p(g);
  forEachRun(g.n, run, pool, [&](int64_t first, int64_t count) {
    const RunScratch t = runScratch(g, p, run);
    for (int64_t s = 0; s < count; ++s) {
      pad(x + (first + s) * g.c * g.h * g.w, t.padded, g, p);
      im2col(t.padded, t.columns + s * pixels, t.ld, g, p);
    }
    // wide [O, count·pixels] = weight [O, k] · columns [k, count·pixels]
    sgemm(weight, t.columns, t.wide, g.o, count * pixels, k, false, false, k, t.ld, t.ld);
    fromWide(t.wide, y + first * g.o * pixels, g, count, t.ld);
  });
}

void conv2dGradInput(const float* dy, const float* weight, float* dx, const ConvGeometry& g,
                     ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, pixels = g.oh() * g.ow(), run = samplesPerGemm(g);
  const Padded p(g);
  forEachRun(g.n, run, pool, [&](int64_t first, int64_t count) {
    const RunScratch t = runScratch(g, p, run);
    toWide(dy + first * g.o * pixels, t.wide, g, count, t.ld);
    // columns [k, count·pixels] = weightᵀ [k, O] · wide [O, count·pixels]
    sgemm(weight, t.wide, t.columns, k, count * pixels, g.o, true, false, k, t.ld, t.ld);
    for (int64_t s = 0; s < count; ++s) {
      col2im(t.columns + s * pixels, t.ld, t.padded, g, p);
      unpad(t.padded, dx + (first + s) * g.c * g.h * g.w, g, p);
    }
  });
}

void conv2dGradWeight(const float* dy, const float* x, float* dweight, const ConvGeometry& g,
                      ThreadPool& pool) {
  const int64_t k = g.c * g.kh * g.kw, pixels = g.oh() * g.ow();
  // Fixed groups of samples each produce a partial dweight; partials are added in group
  // order, so the sum does not depend on the thread count.
  const int64_t groups = std::min<int64_t>(g.n, 16);
  const int64_t perGroup = (g.n + groups - 1) / groups;
  const int64_t run = std::min(perGroup, samplesPerGemm(g));
  const Padded p(g);
  std::vector<float> partial(groups * g.o * k, 0.0f);
  pool.parallelFor(groups, 1, [&](int64_t begin, int64_t end) {
    const RunScratch t = runScratch(g, p, run, g.o * k);
    for (int64_t gi = begin; gi < end; ++gi) {
      float* acc = partial.data() + gi * g.o * k;
      inRuns(gi * perGroup, std::min(g.n, (gi + 1) * perGroup), run,
             [&](int64_t first, int64_t count) {
               for (int64_t s = 0; s < count; ++s) {
                 pad(x + (first + s) * g.c * g.h * g.w, t.padded, g, p);
                 im2col(t.padded, t.columns + s * pixels, t.ld, g, p);
               }
               toWide(dy + first * g.o * pixels, t.wide, g, count, t.ld);
               // [O, k] = wide [O, count·pixels] · columnsᵀ [count·pixels, k]
               sgemm(t.wide, t.columns, t.extra, g.o, k, count * pixels, false, true, t.ld, t.ld,
                     k);
               for (int64_t i = 0; i < g.o * k; ++i) acc[i] += t.extra[i];
             });
    }
  });
  std::fill(dweight, dweight + g.o * k, 0.0f);
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t i = 0; i < g.o * k; ++i) dweight[i] += partial[gi * g.o * k + i];
}

}  // namespace dtc::cpu
