// Causal softmax over attention scores [batch, T, T] and its gradient. Row i attends to keys
// j <= i; masked entries are exactly 0 in the output and in the gradient.
#include <algorithm>
#include <cmath>

#include "cpu/transformer_kernels.h"

namespace dtc::cpu {

void causalSoftmax(const float* x, float* y, int64_t batch, int64_t t, float scale,
                   ThreadPool& pool) {
  pool.parallelFor(batch * t, std::max<int64_t>(1, 4096 / std::max<int64_t>(t, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = r % t;  // query position
      const float* in = x + r * t;
      float* out = y + r * t;
      float maxv = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) maxv = std::max(maxv, scale * in[j]);
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        float e = std::exp(scale * in[j] - maxv);
        out[j] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j <= i; ++j) out[j] *= inv;
      for (int64_t j = i + 1; j < t; ++j) out[j] = 0.0f;
    }
  });
}

void causalSoftmaxGrad(const float* dy, const float* y, float* dx, int64_t batch, int64_t t,
                       float scale, ThreadPool& pool) {
  pool.parallelFor(batch * t, std::max<int64_t>(1, 4096 / std::max<int64_t>(t, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = r % t;
      const float* g = dy + r * t;
      const float* p = y + r * t;
      float* out = dx + r * t;
      double dot = 0;
      for (int64_t j = 0; j <= i; ++j) dot += double(g[j]) * p[j];
      const float d = static_cast<float>(dot);
      for (int64_t j = 0; j <= i; ++j) out[j] = scale * p[j] * (g[j] - d);
      for (int64_t j = i + 1; j < t; ++j) out[j] = 0.0f;
    }
  });
}

}  // namespace dtc::cpu
