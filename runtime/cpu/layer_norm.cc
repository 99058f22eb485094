// LayerNorm over the last dimension, as nn.LayerNorm (biased variance), and its gradient.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/transformer_kernels.h"

namespace dtc::cpu {

void layerNorm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
               int64_t rows, int64_t c, float eps, ThreadPool& pool) {
  pool.parallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(c, 1)),
                   [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * c;
      double sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += in[j];
      const double mu = sum / c;
      double sq = 0;
      for (int64_t j = 0; j < c; ++j) sq += (in[j] - mu) * (in[j] - mu);
      const float m = static_cast<float>(mu);
      const float s = static_cast<float>(1.0 / std::sqrt(sq / c + eps));
      float* out = y + r * c;
      for (int64_t j = 0; j < c; ++j) out[j] = (in[j] - m) * s * w[j] + b[j];
      mean[r] = m;
      rstd[r] = s;
    }
  });
}

void layerNormGrad(const float* dy, const float* x, const float* w, const float* mean,
                   const float* rstd, float* dx, float* dw, float* db, int64_t rows, int64_t c,
                   ThreadPool& pool) {
  // dw and db are sums over rows: each fixed chunk of rows sums into its own partials (in
  // double), and the partials are added in chunk order, so the result does not depend on how
  // many threads ran the chunks.
  const int64_t chunkRows = 64;
  const int64_t chunks = (rows + chunkRows - 1) / chunkRows;
  std::vector<double> partial(static_cast<size_t>(chunks) * 2 * c, 0.0);
  pool.parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      double* pw = partial.data() + k * 2 * c;
      double* pb = pw + c;
      for (int64_t r = k * chunkRows; r < std::min(rows, (k + 1) * chunkRows); ++r) {
        const float* g = dy + r * c;
        const float* in = x + r * c;
        const float m = mean[r], s = rstd[r];
        // dx = rstd · (g·w − mean(g·w) − xhat · mean(g·w·xhat))
        double sumG = 0, sumGX = 0;
        for (int64_t j = 0; j < c; ++j) {
          const double xhat = (in[j] - m) * s;
          const double gw = double(g[j]) * w[j];
          sumG += gw;
          sumGX += gw * xhat;
          pw[j] += g[j] * xhat;
          pb[j] += g[j];
        }
        const double meanG = sumG / c, meanGX = sumGX / c;
        float* out = dx + r * c;
        for (int64_t j = 0; j < c; ++j) {
          const double xhat = (in[j] - m) * s;
          out[j] = static_cast<float>(s * (double(g[j]) * w[j] - meanG - xhat * meanGX));
        }
      }
    }
  });
  for (int64_t j = 0; j < c; ++j) {
    double sw = 0, sb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      sw += partial[k * 2 * c + j];
      sb += partial[k * 2 * c + c + j];
    }
    dw[j] = static_cast<float>(sw);
    db[j] = static_cast<float>(sb);
  }
}

}  // namespace dtc::cpu
