// LayerNorm over the last dimension, as nn.LayerNorm (biased variance), and its gradient.
// Row statistics are accumulated in double: the two-pass variance then stays accurate even
// when |mean| ≫ std, which single-pass fp32 formulas get badly wrong.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"

namespace dtc::cpu {
namespace {

// Floats per forward task.
constexpr int64_t kGrainFloats = 8192;
// dw/db partial sums: at least this many rows per chunk (so a chunk amortises its C-wide
// partial buffer) and at most kMaxChunks chunks (so the buffer stays small for long inputs).
constexpr int64_t kMinChunkRows = 32;
constexpr int64_t kMaxChunks = 256;

}  // namespace

void layerNorm(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
               int64_t rows, int64_t c, float eps, ThreadPool& pool) {
  // x, y: [rows, C]; w, b: [C]; mean, rstd: [rows].
  pool.parallelFor(rows, std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(c, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const float* in = x + r * c;
                       double sum = 0;
                       for (int64_t j = 0; j < c; ++j) sum += in[j];
                       const double mu = sum / static_cast<double>(c);
                       double sq = 0;
                       for (int64_t j = 0; j < c; ++j) {
                         const double d = in[j] - mu;
                         sq += d * d;
                       }
                       const float m = static_cast<float>(mu);
                       const float s =
                           static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(c) + eps));
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
  // dy, x, dx: [rows, C]; w, dw, db: [C]; mean, rstd: [rows].
  // dw and db are sums over rows. The rows are cut into chunks by the shape alone; each chunk
  // sums into its own double partials, and the partials are added in chunk order. So the
  // result is bit-identical for any thread count, with no float atomics or locks.
  const int64_t chunkRows = std::max(kMinChunkRows, (rows + kMaxChunks - 1) / kMaxChunks);
  const int64_t chunks = (rows + chunkRows - 1) / chunkRows;
  std::vector<double> partial(static_cast<size_t>(chunks) * 2 * c, 0.0);  // [chunks, 2, C]
  pool.parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      double* pw = partial.data() + k * 2 * c;
      double* pb = pw + c;
      const int64_t rEnd = std::min(rows, (k + 1) * chunkRows);
      for (int64_t r = k * chunkRows; r < rEnd; ++r) {
        const float* g = dy + r * c;
        const float* in = x + r * c;
        const double m = mean[r], s = rstd[r];
        // With xhat = (x − mean)·rstd and gw = dy·w:
        //   dx = rstd · (gw − mean(gw) − xhat · mean(gw · xhat))
        double sumG = 0, sumGX = 0;
        for (int64_t j = 0; j < c; ++j) {
          const double xhat = (in[j] - m) * s;
          const double gw = static_cast<double>(g[j]) * w[j];
          sumG += gw;
          sumGX += gw * xhat;
          pw[j] += g[j] * xhat;
          pb[j] += g[j];
        }
        const double meanG = sumG / static_cast<double>(c);
        const double meanGX = sumGX / static_cast<double>(c);
        float* out = dx + r * c;
        for (int64_t j = 0; j < c; ++j) {
          const double xhat = (in[j] - m) * s;
          const double gw = static_cast<double>(g[j]) * w[j];
          out[j] = static_cast<float>(s * (gw - meanG - xhat * meanGX));
        }
      }
    }
  });
  // Columns are independent, and each is summed over chunks in a fixed order.
  pool.parallelFor(c, 256, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      double sw = 0, sb = 0;
      for (int64_t k = 0; k < chunks; ++k) {
        sw += partial[k * 2 * c + j];
        sb += partial[k * 2 * c + c + j];
      }
      dw[j] = static_cast<float>(sw);
      db[j] = static_cast<float>(sb);
    }
  });
}

}  // namespace dtc::cpu
