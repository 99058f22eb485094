// Cross-entropy over a vocabulary split between devices (cross_entropy_* ops): each device
// holds a block of every row of logits, starting at class `offset`; per-row maxima and sums are
// combined across devices between the steps. Accumulates in double and takes the vectorised
// exp, as losses.cc.
#include <algorithm>
#include <cmath>

#include "cpu/kernels/cross_entropy_row.h"
#include "cpu/kernels/fast_math.h"
#include "cpu/kernels/kernels.h"

namespace dtc::cpu {

void crossEntropyRowMax(const float* logits, int64_t rows, int64_t classes, float* rowMax,
                        ThreadPool& pool) {
  pool.parallelFor(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rowMax[r] = cpu::rowMax(logits + r * classes, classes);
  });
}

void crossEntropyParts(const float* logits, const int64_t* labels, const float* rowMax,
                       int64_t rows, int64_t classes, int64_t offset, float* sumExp, float* target,
                       ThreadPool& pool) {
  pool.parallelFor(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = logits + r * classes;
      sumExp[r] = static_cast<float>(sumExpShifted(row, classes, rowMax[r]));
      const int64_t local = labels[r] - offset;
      target[r] = local >= 0 && local < classes ? row[local] : 0.0f;
    }
  });
}

float crossEntropyCombine(const float* rowMax, const float* sumExp, const float* target,
                          int64_t rows, int64_t count, const int64_t* labels,
                          IgnoredLabel ignored) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (!labels || !ignored.ignores(labels[r]))
      total += static_cast<double>(rowMax[r]) + std::log(static_cast<double>(sumExp[r])) -
               static_cast<double>(target[r]);
  return static_cast<float>(total / static_cast<double>(count));
}

void crossEntropyPartsGrad(float dloss, const float* logits, const int64_t* labels,
                           const float* rowMax, const float* sumExp, int64_t rows, int64_t classes,
                           int64_t offset, int64_t count, float* dlogits, ThreadPool& pool,
                           IgnoredLabel ignored) {
  const float scale = dloss / static_cast<float>(count);
  pool.parallelFor(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = logits + r * classes;
      float* drow = dlogits + r * classes;
      if (ignored.ignores(labels[r])) {
        std::fill(drow, drow + classes, 0.0f);
        continue;
      }
      const float invSum = static_cast<float>(1.0 / sumExp[r]);
      // The exps into drow (which may be row: each is read before it is written).
      expShifted(row, 1.0f, rowMax[r], drow, classes);
      gradientFromExps(drow, classes, invSum, scale, labels[r] - offset);
    }
  });
}

}  // namespace dtc::cpu
