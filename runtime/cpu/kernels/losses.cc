// Softmax cross-entropy and MSE with their gradients. Loss reductions accumulate in double
// over fixed-size blocks (shape-determined, so the result does not depend on the pool size).
#include <algorithm>
#include <cmath>

#include "cpu/kernels/cross_entropy_row.h"
#include "cpu/kernels/fast_math.h"
#include "cpu/kernels/kernels.h"

namespace dtc::cpu {
namespace {

constexpr int64_t kGrain = 16384;

// Sum of f(i) over [0, n) in double: blocks of `block` indices, block sums added in order.
template <typename Fn>
double blockedSum(int64_t n, int64_t block, ThreadPool& pool, Fn f) {
  const int64_t blocks = (n + block - 1) / block;
  std::vector<double> partial(blocks, 0.0);
  pool.parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      // Four chains hide the latency of the dependent double adds.
      double s[4] = {0, 0, 0, 0};
      const int64_t iEnd = std::min(n, (b + 1) * block);
      int64_t i = b * block;
      for (; i + 4 <= iEnd; i += 4)
        for (int u = 0; u < 4; ++u) s[u] += f(i + u);
      for (; i < iEnd; ++i) s[0] += f(i);
      partial[b] = (s[0] + s[1]) + (s[2] + s[3]);
    }
  });
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

// Rows per parallel task so that a task touches about kGrain logits.
int64_t rowGrain(int64_t classes) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(classes, 1));
}

struct RowStats {
  float max;
  double sumExp;  // Σ exp(x − max), ≥ 1
};

RowStats rowStats(const float* row, int64_t classes) {
  const float m = rowMax(row, classes);
  return {m, sumExpShifted(row, classes, m)};
}

}  // namespace

bool softmaxCrossEntropy(const float* logits, const int64_t* labels, int64_t rows, int64_t classes,
                         float* loss, ThreadPool& pool, int64_t divisor, IgnoredLabel ignored) {
  for (int64_t r = 0; r < rows; ++r)
    if ((labels[r] < 0 || labels[r] >= classes) && !ignored.ignores(labels[r])) return false;
  // Per row: log Σ exp(x) − x[label] = max + log Σ exp(x − max) − x[label].
  const double total = blockedSum(rows, rowGrain(classes), pool, [&](int64_t r) {
    if (ignored.ignores(labels[r])) return 0.0;
    const float* row = logits + r * classes;
    const RowStats st = rowStats(row, classes);
    return static_cast<double>(st.max) + std::log(st.sumExp) - static_cast<double>(row[labels[r]]);
  });
  // rows == 0 gives NaN, like a mean over nothing in torch.
  *loss = static_cast<float>(total / static_cast<double>(divisor ? divisor : rows));
  return true;
}

void softmaxCrossEntropyGrad(const float* dloss, const float* logits, const int64_t* labels,
                             int64_t rows, int64_t classes, float* dlogits, ThreadPool& pool,
                             int64_t divisor, IgnoredLabel ignored) {
  const float scale = *dloss / static_cast<float>(divisor ? divisor : rows);
  // A row's stats are taken before any of it is written, so dlogits may alias logits.
  pool.parallelFor(rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = logits + r * classes;
      float* drow = dlogits + r * classes;
      if (ignored.ignores(labels[r])) {
        std::fill(drow, drow + classes, 0.0f);
        continue;
      }
      // The exps once, into drow (which may be row: each is read before it is written), summed
      // in order in double as rowStats sums them.
      expShifted(row, 1.0f, rowMax(row, classes), drow, classes);
      double sumExp = 0;
      for (int64_t c = 0; c < classes; ++c) sumExp += drow[c];
      const float invSum = static_cast<float>(1.0 / sumExp);
      gradientFromExps(drow, classes, invSum, scale, labels[r]);
    }
  });
}

bool nllLoss(const float* x, const int64_t* labels, const float* weight, NllShape s, float* loss,
             IgnoredLabel ignored) {
  double total = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    const int64_t label = labels[r];
    double term = 0;
    if (!ignored.ignores(label)) {
      if (label < 0 || label >= s.classes) return false;
      term = -static_cast<double>(x[r * s.classes + label]) * (weight ? weight[label] : 1.0);
    }
    if (s.perRow)
      loss[r] = static_cast<float>(term);
    else
      total += term;
  }
  if (!s.perRow)
    *loss = static_cast<float>(total / static_cast<double>(s.divisor ? s.divisor : s.rows));
  return true;
}

void nllLossGrad(const float* dloss, const int64_t* labels, const float* weight, NllShape s,
                 float* dx, IgnoredLabel ignored) {
  const float mean = s.perRow ? 0.0f : -*dloss / static_cast<float>(s.divisor ? s.divisor : s.rows);
  std::fill(dx, dx + s.rows * s.classes, 0.0f);
  for (int64_t r = 0; r < s.rows; ++r) {
    const int64_t label = labels[r];
    if (ignored.ignores(label) || label < 0 || label >= s.classes) continue;
    const float value = s.perRow ? -dloss[r] : mean;
    dx[r * s.classes + label] = weight ? value * weight[label] : value;
  }
}

float labelFraction(const int64_t* labels, int64_t n, const float* weight, int64_t classes,
                    IgnoredLabel ignored, int64_t divisor) {
  double kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = labels[i];
    if (ignored.ignores(label)) continue;
    if (!weight)
      kept += 1;
    else if (label >= 0 && label < classes)
      kept += weight[label];
  }
  return static_cast<float>(kept / static_cast<double>(divisor ? divisor : n));
}

void mse(const float* pred, const float* target, int64_t n, float* loss, ThreadPool& pool,
         int64_t divisor) {
  const double total = blockedSum(n, kGrain, pool, [&](int64_t i) {
    const double d = static_cast<double>(pred[i]) - static_cast<double>(target[i]);
    return d * d;
  });
  *loss = static_cast<float>(total / static_cast<double>(divisor ? divisor : n));
}

void mseGrad(const float* dloss, const float* pred, const float* target, int64_t n, float* dpred,
             ThreadPool& pool, int64_t divisor) {
  // Same association as torch's mse_loss_backward: (2/n)·(pred − target)·dloss.
  const float norm = 2.0f / static_cast<float>(divisor ? divisor : n);
  const float g = *dloss;
  pool.parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dpred[i] = norm * (pred[i] - target[i]) * g;
  });
}

}  // namespace dtc::cpu
