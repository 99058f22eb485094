// RMSNorm over the last dimension, as transformers' LlamaRMSNorm computes it in float32, and its
// gradient. Row sums are accumulated in double; the weight's gradient is summed over rows column by
// column, so every result is the same for any thread count.
#include "cpu/kernels/rms_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dtc::cpu {
namespace {

constexpr int64_t kGrainFloats = 8192;
// Columns of the weight gradient per task: each task sums its columns over every row.
constexpr int64_t kColumnsPerTask = 64;

int64_t rowGrain(int64_t c) { return std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(c, 1)); }

}  // namespace

void rmsNorm(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t c,
             float eps, ThreadPool& pool) {
  pool.parallelFor(rows, rowGrain(c), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * c;
      double sq = 0;
      for (int64_t j = 0; j < c; ++j) sq += static_cast<double>(in[j]) * in[j];
      const float s = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(c) + eps));
      rstd[r] = s;
      float* out = y + r * c;
      for (int64_t j = 0; j < c; ++j) out[j] = in[j] * s * w[j];
    }
  });
}

void rmsNormGrad(const float* dy, const float* x, const float* w, const float* rstd, float* dx,
                 float* dw, int64_t rows, int64_t c, ThreadPool& pool) {
  // y = x·r·w with r = (mean(x²) + eps)^(-1/2): dx = r·(g − x·r²·mean(g·x)), g = dy·w.
  pool.parallelFor(rows, rowGrain(c), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *g = dy + r * c, *in = x + r * c;
      double dot = 0;
      for (int64_t j = 0; j < c; ++j) dot += static_cast<double>(g[j]) * w[j] * in[j];
      const float s = rstd[r];
      const float k = static_cast<float>(dot / static_cast<double>(c)) * s * s;
      float* out = dx + r * c;
      for (int64_t j = 0; j < c; ++j) out[j] = s * (g[j] * w[j] - in[j] * k);
    }
  });
  const int64_t tasks = (c + kColumnsPerTask - 1) / kColumnsPerTask;
  pool.parallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
    const int64_t from = begin * kColumnsPerTask, to = std::min(c, end * kColumnsPerTask);
    std::vector<double> sum(static_cast<size_t>(to - from), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *g = dy + r * c, *in = x + r * c;
      const double s = rstd[r];
      for (int64_t j = from; j < to; ++j) sum[j - from] += static_cast<double>(g[j]) * in[j] * s;
    }
    for (int64_t j = from; j < to; ++j) dw[j] = static_cast<float>(sum[j - from]);
  });
}

}  // namespace dtc::cpu
