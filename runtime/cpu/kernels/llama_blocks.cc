// The blocks Llama-family models are made of, fused: RMSNorm over the last dimension (as
// transformers' LlamaRMSNorm, in float32) and SwiGLU's gate silu(gate)·up, with their gradients.
// Row sums are accumulated in double; the weight's gradient is summed over rows column by column,
// so every result is the same for any thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"

namespace dtc::cpu {
namespace {

constexpr int64_t kGrainFloats = 8192;
// Columns of the weight gradient per task: each task sums its columns over every row.
constexpr int64_t kColumnsPerTask = 64;

int64_t rowGrain(int64_t c) { return std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(c, 1)); }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

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

void swiglu(const float* gate, const float* up, float* y, int64_t n, ThreadPool& pool) {
  pool.parallelFor(n, kGrainFloats, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = gate[i] * sigmoid(gate[i]) * up[i];
  });
}

void swigluGrad(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                int64_t n, ThreadPool& pool) {
  // d silu(g)/dg = s·(1 + g·(1 − s)), s = sigmoid(g).
  pool.parallelFor(n, kGrainFloats, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i], s = sigmoid(g);
      dup[i] = dy[i] * g * s;
      dgate[i] = dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
    }
  });
}

void rotary(const float* x, const float* cos, const float* sin, float* y, int64_t n, int64_t t,
            int64_t d, int64_t heads, bool transpose, ThreadPool& pool) {
  // Rows of D: y = x·cos + R(x)·sin with R(x) = [−x₂, x₁]; the gradient (transpose) is
  // dy·cos + Rᵀ(dy·sin) with Rᵀ(z) = [z₂, −z₁].
  const int64_t h = d / 2, rows = n / std::max<int64_t>(d, 1);
  pool.parallelFor(rows, rowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * d;
      const int64_t position = (r / heads) % t;
      const float *c = cos + position * d, *s = sin + position * d;
      float* out = y + r * d;
      for (int64_t j = 0; j < h; ++j) {
        if (transpose) {
          out[j] = in[j] * c[j] + in[j + h] * s[j + h];
          out[j + h] = in[j + h] * c[j + h] - in[j] * s[j];
        } else {
          out[j] = in[j] * c[j] - in[j + h] * s[j];
          out[j + h] = in[j + h] * c[j + h] + in[j] * s[j + h];
        }
      }
    }
  });
}

}  // namespace dtc::cpu
