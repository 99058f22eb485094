// The routing math of a mixture-of-experts layer compiled into both backends (the CPU's
// cpu/kernels/moe.cc, CUDA's kernels/moe.cu), so that both pick the same experts for the same
// scores: a different choice on a tie would send a token elsewhere, not just round differently.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define DTC_MOE_FN __host__ __device__ inline
#else
#define DTC_MOE_FN inline
#endif

namespace dtc::moe {

// G groups of S tokens of width D, each routed to K of E experts with C slots per group.
struct MoeShape {
  int64_t groups = 0, tokens = 0, experts = 0, topK = 0, capacity = 0, width = 0;
};

// A NaN score ranks as -inf: the order stays total, so K distinct experts are always found.
DTC_MOE_FN float rankKey(float score) { return score != score ? -INFINITY : score; }

// Whether expert a ranks before b: the larger score, on a tie the lower index.
DTC_MOE_FN bool ranksBefore(const float* row, int64_t a, int64_t b) {
  const float ka = rankKey(row[a]), kb = rankKey(row[b]);
  return ka > kb || (ka == kb && a < b);
}

// The K best experts of a token's scores `row` [E] in rank order into expert[0..K), and their
// scores (normalised to sum 1 with `normalize`) into weight[0..K). O(K·E) without scratch: each
// pick is the best of those ranking after the previous one. K <= E.
DTC_MOE_FN void topK(const float* row, int64_t experts, int64_t k, bool normalize, int64_t* expert,
                     float* weight) {
  int64_t previous = -1;
  float total = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      if (previous >= 0 && !ranksBefore(row, previous, e)) continue;
      if (best < 0 || ranksBefore(row, e, best)) best = e;
    }
    expert[j] = best;
    weight[j] = row[best];
    total += row[best];
    previous = best;
  }
  if (normalize)
    for (int64_t j = 0; j < k; ++j) weight[j] /= total;
}

// A plan entry the buffers hold: an expert in [0, E) and a slot in [-1, C) (-1: dropped).
DTC_MOE_FN bool entryInside(const MoeShape& m, int64_t expert, int64_t slot) {
  return expert >= 0 && expert < m.experts && slot >= -1 && slot < m.capacity;
}

// The offset of row (expert, group, slot) of the buffers [E, G, C, D].
DTC_MOE_FN int64_t bufferRow(const MoeShape& m, int64_t expert, int64_t group, int64_t slot) {
  return ((expert * m.groups + group) * m.capacity + slot) * m.width;
}

// One token's gradient of its k weights with respect to its scores `row` [E], added into `out`
// [E] (zeroed by the caller) at the chosen experts. Without `normalize` the weights are the
// scores; with it w_j = s_j / Z, so ∂w_i/∂s_j = (δ_ij − w_i) / Z and ds_j = (dw_j − Σ_i dw_i·w_i)
// / Z, Z summed as the forward summed it.
DTC_MOE_FN void routeGradRow(const float* row, const float* dw, const int64_t* chosen, int64_t k,
                             bool normalize, float* out) {
  if (!normalize) {
    for (int64_t j = 0; j < k; ++j) out[chosen[j]] += dw[j];
    return;
  }
  float total = 0.0f;
  for (int64_t j = 0; j < k; ++j) total += row[chosen[j]];
  float dot = 0.0f;
  for (int64_t j = 0; j < k; ++j) dot += dw[j] * (row[chosen[j]] / total);
  for (int64_t j = 0; j < k; ++j) out[chosen[j]] += (dw[j] - dot) / total;
}

}  // namespace dtc::moe
