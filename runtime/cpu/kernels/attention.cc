// Softmax over rows and its gradient: plain, and causal over attention scores [batch, T, T], where
// row i attends to keys j <= i and masked entries are exactly 0 in the output and in the gradient
// (the matmul that follows reads them, so they must be real zeros, not leftovers). Rows are
// independent, so they are spread over the pool and each row is computed the same way whatever
// the pool size.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/kernels/fast_math.h"
#include "cpu/kernels/transformer_kernels.h"

namespace dtc::cpu {
namespace {

// Rows per task so that a task touches about this many scores (row r has r % T + 1 unmasked).
constexpr int64_t kGrainScores = 8192;

int64_t rowGrain(int64_t t) { return std::max<int64_t>(1, kGrainScores / std::max<int64_t>(t, 1)); }

// Softmax of scale·x over each row's first visible(r) entries, 0 beyond them: the causal form
// sees keys j <= i of row r = (b, i), the plain form the whole row. In place is safe: each entry
// is read before (or as) it is written, and the masked tail is never read.
template <typename Visible>
void softmaxRows(const float* x, float* y, int64_t rows, int64_t n, float scale, Visible visible,
                 ThreadPool& pool) {
  pool.parallelFor(rows, rowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t seen = visible(r);
      const float* in = x + r * n;
      float* out = y + r * n;
      // Subtracting the max keeps exp() in range for large scores; the max entry gives exp(0).
      float maxv = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < seen; ++j) maxv = std::max(maxv, scale * in[j]);
      expShifted(in, scale, maxv, out, seen);  // vectorised (fast_math.h)
      double sum = 0;  // ≥ 1; in double so long rows lose nothing to the running sum
      for (int64_t j = 0; j < seen; ++j) sum += out[j];
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < seen; ++j) out[j] *= inv;
      std::fill(out + seen, out + n, 0.0f);
    }
  });
}

// Softmax Jacobian-vector product: dz_j = y_j (dy_j − Σ_k dy_k y_k), then the chain rule through
// z = scale·x. Masked y are 0, so summing over the visible entries is the full sum. dx may alias
// dy or y: the row's dot product is taken before any of it is written.
template <typename Visible>
void softmaxGradRows(const float* dy, const float* y, float* dx, int64_t rows, int64_t n,
                     float scale, Visible visible, ThreadPool& pool) {
  pool.parallelFor(rows, rowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t seen = visible(r);
      const float* g = dy + r * n;
      const float* p = y + r * n;
      float* out = dx + r * n;
      double dot = 0;
      for (int64_t j = 0; j < seen; ++j) dot += static_cast<double>(g[j]) * p[j];
      const float d = static_cast<float>(dot);
      for (int64_t j = 0; j < seen; ++j) out[j] = scale * p[j] * (g[j] - d);
      std::fill(out + seen, out + n, 0.0f);
    }
  });
}

}  // namespace

void logSoftmax(const float* x, float* y, int64_t rows, int64_t n, float scale, ThreadPool& pool) {
  pool.parallelFor(rows, rowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * n;
      float* out = y + r * n;
      float maxv = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) maxv = std::max(maxv, scale * in[j]);
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(scale * in[j] - maxv);
      // As PyTorch: (z − max) − log Σ exp(z − max).
      const float logSum = static_cast<float>(std::log(sum));
      for (int64_t j = 0; j < n; ++j) out[j] = (scale * in[j] - maxv) - logSum;
    }
  });
}

void logSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t rows, int64_t n,
                    float scale, ThreadPool& pool) {
  pool.parallelFor(rows, rowGrain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* g = dy + r * n;
      const float* p = y + r * n;
      float* out = dx + r * n;
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += g[j];
      const float t = static_cast<float>(total);
      for (int64_t j = 0; j < n; ++j) out[j] = scale * (g[j] - std::exp(p[j]) * t);
    }
  });
}

void causalSoftmax(const float* x, float* y, int64_t batch, int64_t t, float scale,
                   ThreadPool& pool) {
  // x and y are [batch·T, T] rows; query i sees keys 0..i.
  softmaxRows(
      x, y, batch * t, t, scale, [t](int64_t r) { return r % t + 1; }, pool);
}

void causalSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t batch, int64_t t,
                       float scale, ThreadPool& pool) {
  softmaxGradRows(
      dy, y, dx, batch * t, t, scale, [t](int64_t r) { return r % t + 1; }, pool);
}

void softmax(const float* x, float* y, int64_t rows, int64_t n, float scale, ThreadPool& pool) {
  softmaxRows(
      x, y, rows, n, scale, [n](int64_t) { return n; }, pool);
}

void softmaxGrad(const float* dy, const float* y, float* dx, int64_t rows, int64_t n, float scale,
                 ThreadPool& pool) {
  softmaxGradRows(
      dy, y, dx, rows, n, scale, [n](int64_t) { return n; }, pool);
}

}  // namespace dtc::cpu
