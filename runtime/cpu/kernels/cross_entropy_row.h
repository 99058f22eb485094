// One row of a softmax cross-entropy, shared by the kernels over the whole vocabulary
// (losses.cc) and those over a device's block of it (vocab_parallel.cc), so both compute with
// the same arithmetic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace dtc::cpu {

inline float rowMax(const float* row, int64_t classes) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < classes; ++c) m = std::max(m, row[c]);
  return m;
}

// drow holds the row's exp(x − max); it becomes scale · (p − onehot(label)) with p = exp·invSum.
// `label` outside [0, classes) (another device's class) subtracts nothing here.
inline void gradientFromExps(float* drow, int64_t classes, float invSum, float scale,
                             int64_t label) {
  const bool here = label >= 0 && label < classes;
  const float atLabel = here ? drow[label] * invSum : 0.0f;
  for (int64_t c = 0; c < classes; ++c) drow[c] = scale * (drow[c] * invSum);
  if (here) drow[label] = scale * (atLabel - 1.0f);
}

}  // namespace dtc::cpu
