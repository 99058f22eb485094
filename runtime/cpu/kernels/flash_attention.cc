// Causal attention in one pass per query (flash-style): out = softmax(scale·q·kᵀ, causal)·v and
// the log-sum-exp of each query's scores; the backward pass recomputes the probabilities from
// q, k and the log-sum-exp instead of keeping [T, T] of them. (batch, head) slices are
// independent and spread over the pool; within a slice the order of every sum is fixed.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"

namespace dtc::cpu {

void causalAttention(const float* q, const float* k, const float* v, float* out, float* lse,
                     int64_t slices, int64_t t, int64_t d, float scale, ThreadPool& pool) {
  causalAttention(q, k, v, out, lse, slices, t, t, d, scale, AttentionPositions{}, pool);
}

void causalAttentionGrad(const float* dout, const float* q, const float* k, const float* v,
                         const float* out, const float* lse, float* dq, float* dk, float* dv,
                         int64_t slices, int64_t t, int64_t d, float scale, ThreadPool& pool) {
  causalAttentionGrad(dout, q, k, v, out, lse, dq, dk, dv, slices, t, t, d, scale,
                      AttentionPositions{}, pool);
}

namespace {

// The keys query i sees: a prefix [0, i] in the plain layout; else, in each chunk of the layout
// (whose rows hold consecutive original positions), the rows not after the query's position —
// a prefix of the chunk, visited in the layout's order with no test per key.
template <typename Visit>
void forVisibleKeys(const AttentionPositions& at, int64_t i, int64_t tk, Visit visit) {
  if (at.plain()) {
    for (int64_t j = 0; j <= i && j < tk; ++j) visit(j);
    return;
  }
  const int64_t mine = at.queryPosition(i);
  const int64_t chunk = at.chunks > 0 ? at.length / at.chunks : at.length;
  for (int64_t row = at.kFirst; row < at.kFirst + tk;) {
    const int64_t end = std::min(at.kFirst + tk, (row / chunk + 1) * chunk);
    const int64_t first = sequencePosition(row, at.length, at.chunks);
    const int64_t seen = std::clamp<int64_t>(mine - first + 1, 0, end - row);
    for (int64_t j = row - at.kFirst; j < row - at.kFirst + seen; ++j) visit(j);
    row = end;
  }
}

}  // namespace

void causalAttention(const float* q, const float* k, const float* v, float* out, float* lse,
                     int64_t slices, int64_t t, int64_t tk, int64_t d, float scale,
                     const AttentionPositions& at, ThreadPool& pool, int64_t group) {
  pool.parallelFor(slices, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> p(tk);
    std::vector<double> acc(d);
    for (int64_t s = begin; s < end; ++s) {
      const float* qs = q + s * t * d;
      const float* ks = k + s / group * tk * d;
      const float* vs = v + s / group * tk * d;
      for (int64_t i = 0; i < t; ++i) {
        float maxv = -std::numeric_limits<float>::infinity();
        forVisibleKeys(at, i, tk, [&](int64_t j) {
          float dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qs[i * d + c] * ks[j * d + c];
          p[j] = scale * dot;
          maxv = std::max(maxv, p[j]);
        });
        double sum = 0;
        forVisibleKeys(at, i, tk, [&](int64_t j) {
          p[j] = std::exp(p[j] - maxv);
          sum += p[j];
        });
        std::fill(acc.begin(), acc.end(), 0.0);
        forVisibleKeys(at, i, tk, [&](int64_t j) {
          for (int64_t c = 0; c < d; ++c) acc[c] += static_cast<double>(p[j]) * vs[j * d + c];
        });
        // A block of the keys may hold none this query sees (a ring's step).
        float* o = out + (s * t + i) * d;
        for (int64_t c = 0; c < d; ++c) o[c] = sum > 0 ? static_cast<float>(acc[c] / sum) : 0.f;
        lse[s * t + i] = sum > 0 ? maxv + static_cast<float>(std::log(sum))
                                 : -std::numeric_limits<float>::infinity();
      }
    }
  });
}

void causalAttentionGrad(const float* dout, const float* q, const float* k, const float* v,
                         const float* out, const float* lse, float* dq, float* dk, float* dv,
                         int64_t slices, int64_t t, int64_t tk, int64_t d, float scale,
                         const AttentionPositions& at, ThreadPool& pool, int64_t group) {
  // One task per key/value slice: its group's query slices in order, so that dk and dv sum over
  // them in one fixed order, on one thread.
  pool.parallelFor(slices / group, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> gq(d), gk(tk * d), gv(tk * d);
    for (int64_t kv = begin; kv < end; ++kv) {
      const int64_t kbase = kv * tk * d;
      const float *ks = k + kbase, *vs = v + kbase;
      std::fill(gk.begin(), gk.end(), 0.0);
      std::fill(gv.begin(), gv.end(), 0.0);
      for (int64_t s = kv * group; s < (kv + 1) * group; ++s) {
        const int64_t base = s * t * d;
        const float *qs = q + base, *os = out + base, *dos = dout + base;
        for (int64_t i = 0; i < t; ++i) {
          // D_i = dout_i · out_i: the softmax gradient's correction term for row i.
          double di = 0;
          for (int64_t c = 0; c < d; ++c) di += static_cast<double>(dos[i * d + c]) * os[i * d + c];
          std::fill(gq.begin(), gq.end(), 0.0);
          forVisibleKeys(at, i, tk, [&](int64_t j) {
            float dot = 0;
            for (int64_t c = 0; c < d; ++c) dot += qs[i * d + c] * ks[j * d + c];
            const double pij = std::exp(static_cast<double>(scale * dot) - lse[s * t + i]);
            double dp = 0;
            for (int64_t c = 0; c < d; ++c)
              dp += static_cast<double>(dos[i * d + c]) * vs[j * d + c];
            const double ds = pij * (dp - di) * scale;
            for (int64_t c = 0; c < d; ++c) {
              gv[j * d + c] += pij * dos[i * d + c];
              gq[c] += ds * ks[j * d + c];
              gk[j * d + c] += ds * qs[i * d + c];
            }
          });
          for (int64_t c = 0; c < d; ++c) dq[base + i * d + c] = static_cast<float>(gq[c]);
        }
      }
      for (int64_t x = 0; x < tk * d; ++x) {
        dk[kbase + x] = static_cast<float>(gk[x]);
        dv[kbase + x] = static_cast<float>(gv[x]);
      }
    }
  });
}

void attentionMerge(const float* outA, const float* lseA, const float* outB, const float* lseB,
                    float* out, float* lse, int64_t rows, int64_t d, ThreadPool& pool) {
  pool.parallelFor(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float a = lseA[r], b = lseB[r], m = std::max(a, b);
      if (m == -std::numeric_limits<float>::infinity()) {  // neither saw a key
        std::fill(out + r * d, out + (r + 1) * d, 0.f);
        lse[r] = m;
        continue;
      }
      const double wa = std::exp(static_cast<double>(a) - m),
                   wb = std::exp(static_cast<double>(b) - m), sum = wa + wb;
      for (int64_t c = 0; c < d; ++c)
        out[r * d + c] = static_cast<float>((wa * outA[r * d + c] + wb * outB[r * d + c]) / sum);
      lse[r] = m + static_cast<float>(std::log(sum));
    }
  });
}

}  // namespace dtc::cpu
