// Mixture-of-experts routing, dispatch and combination, and logsumexp. Every output element is
// written by one task in a fixed order (a token's choices in j order, a group's slots in priority
// order), so the results are the same for any thread count. Dispatch and combination run in
// parallel over tokens without races: in a plan from moe_route each (expert, group, slot) row
// belongs to at most one token's choice.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels/moe_kernels.h"

namespace dtc::cpu {
namespace {

constexpr int64_t kGrainFloats = 8192;

int64_t grain(int64_t floatsPerItem) {
  return std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(floatsPerItem, 1));
}

int64_t choices(const MoeShape& m) { return m.groups * m.tokens * m.topK; }

// Checked before anything is written, so a bad entry cannot be followed by a task running ahead.
bool planInside(const int64_t* expert, const int64_t* slot, const MoeShape& m) {
  for (int64_t i = 0, n = choices(m); i < n; ++i)
    if (!moe::entryInside(m, expert[i], slot[i])) return false;
  return true;
}

void zero(float* x, int64_t rows, int64_t width, ThreadPool& pool) {
  pool.parallelFor(rows, grain(width), [&](int64_t begin, int64_t end) {
    std::fill(x + begin * width, x + end * width, 0.0f);
  });
}

}  // namespace

void moeRoute(const float* scores, int64_t* expert, int64_t* slot, float* weight, float* load,
              const MoeShape& m, bool normalize, ThreadPool& pool) {
  const int64_t e = m.experts, k = m.topK;
  pool.parallelFor(m.groups * m.tokens, grain(e * k), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      moe::topK(scores + t * e, e, k, normalize, expert + t * k, weight + t * k);
      float* row = load + t * e;
      std::fill(row, row + e, 0.0f);
      for (int64_t j = 0; j < k; ++j) row[expert[t * k + j]] = 1.0f;
    }
  });
  // Slots in priority order: every token's first choice before any second choice, so a token
  // loses its lower choices to capacity first. Sequential within a group.
  pool.parallelFor(m.groups, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> count(static_cast<size_t>(e));
    for (int64_t g = begin; g < end; ++g) {
      std::fill(count.begin(), count.end(), 0);
      for (int64_t j = 0; j < k; ++j)
        for (int64_t s = 0; s < m.tokens; ++s) {
          const int64_t i = (g * m.tokens + s) * k + j, c = count[expert[i]]++;
          slot[i] = c < m.capacity ? c : -1;
        }
    }
  });
}

bool moeRouteGrad(const float* dweight, const float* scores, const int64_t* expert, float* dscores,
                  const MoeShape& m, bool normalize, ThreadPool& pool) {
  const int64_t e = m.experts, k = m.topK;
  for (int64_t i = 0, n = choices(m); i < n; ++i)
    if (expert[i] < 0 || expert[i] >= e) return false;
  pool.parallelFor(m.groups * m.tokens, grain(e), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* out = dscores + t * e;
      std::fill(out, out + e, 0.0f);
      moe::routeGradRow(scores + t * e, dweight + t * k, expert + t * k, k, normalize, out);
    }
  });
  return true;
}

bool moeDispatch(const float* x, const int64_t* expert, const int64_t* slot, float* buffer,
                 const MoeShape& m, ThreadPool& pool) {
  if (!planInside(expert, slot, m)) return false;
  const int64_t d = m.width, k = m.topK;
  zero(buffer, m.experts * m.groups * m.capacity, d, pool);
  pool.parallelFor(m.groups * m.tokens, grain(d * k), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = t * k + j;
        if (slot[i] < 0) continue;
        std::memcpy(buffer + moe::bufferRow(m, expert[i], t / m.tokens, slot[i]), x + t * d,
                    d * sizeof(float));
      }
  });
  return true;
}

namespace {

// Each token's sum over its kept choices of their buffer rows, each times its weight (1 where
// `weight` is null: dispatch's gradient), in choice order.
void sumChoices(const float* buffer, const int64_t* expert, const int64_t* slot,
                const float* weight, float* y, const MoeShape& m, ThreadPool& pool) {
  const int64_t d = m.width, k = m.topK;
  pool.parallelFor(m.groups * m.tokens, grain(d * k), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* out = y + t * d;
      std::fill(out, out + d, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = t * k + j;
        if (slot[i] < 0) continue;
        const float* in = buffer + moe::bufferRow(m, expert[i], t / m.tokens, slot[i]);
        if (!weight) {
          for (int64_t c = 0; c < d; ++c) out[c] += in[c];
          continue;
        }
        const float w = weight[i];
        for (int64_t c = 0; c < d; ++c) out[c] += w * in[c];
      }
    }
  });
}

}  // namespace

bool moeDispatchGrad(const float* dbuffer, const int64_t* expert, const int64_t* slot, float* dx,
                     const MoeShape& m, ThreadPool& pool) {
  if (!planInside(expert, slot, m)) return false;
  sumChoices(dbuffer, expert, slot, nullptr, dx, m, pool);
  return true;
}

bool moeCombine(const float* buffer, const int64_t* expert, const int64_t* slot,
                const float* weight, float* y, const MoeShape& m, ThreadPool& pool) {
  if (!planInside(expert, slot, m)) return false;
  sumChoices(buffer, expert, slot, weight, y, m, pool);
  return true;
}

bool moeCombineGrad(const float* dy, const float* buffer, const int64_t* expert,
                    const int64_t* slot, const float* weight, float* dbuffer, float* dweight,
                    const MoeShape& m, ThreadPool& pool) {
  if (!planInside(expert, slot, m)) return false;
  const int64_t d = m.width, k = m.topK;
  zero(dbuffer, m.experts * m.groups * m.capacity, d, pool);
  pool.parallelFor(m.groups * m.tokens, grain(2 * d * k), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* g = dy + t * d;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t i = t * k + j;
        if (slot[i] < 0) {
          dweight[i] = 0.0f;
          continue;
        }
        const int64_t row = moe::bufferRow(m, expert[i], t / m.tokens, slot[i]);
        const float *in = buffer + row, w = weight[i];
        float* out = dbuffer + row;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) {
          dot += static_cast<double>(in[c]) * g[c];
          out[c] = w * g[c];
        }
        dweight[i] = static_cast<float>(dot);
      }
    }
  });
  return true;
}

void logSumExp(const float* x, float* y, int64_t rows, int64_t n, ThreadPool& pool) {
  pool.parallelFor(rows, grain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * n;
      float most = -INFINITY;
      for (int64_t j = 0; j < n; ++j) most = in[j] > most ? in[j] : most;
      // An infinite maximum is not subtracted (inf − inf is NaN): torch.logsumexp's -inf for a
      // row of -inf (or no elements), +inf for a row holding +inf.
      const float shift = std::isfinite(most) ? most : 0.0f;
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(in[j] - shift);
      y[r] = shift + static_cast<float>(std::log(sum));
    }
  });
}

void logSumExpGrad(const float* dy, const float* x, const float* y, float* dx, int64_t rows,
                   int64_t n, ThreadPool& pool) {
  pool.parallelFor(rows, grain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *in = x + r * n, g = dy[r], at = y[r];
      float* out = dx + r * n;
      for (int64_t j = 0; j < n; ++j) out[j] = g * std::exp(in[j] - at);
    }
  });
}

}  // namespace dtc::cpu
