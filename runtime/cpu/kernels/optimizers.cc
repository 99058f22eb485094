// SGD and AdamW updates for one tensor, mirroring torch.optim's single-tensor code paths:
// step-level scalars are computed in double (they are Python floats in torch) and rounded to
// float once; element-wise math is float. Each element's inputs are read before any output is
// written, so outputs may alias inputs.
#include <cmath>

#include "cpu/kernels/fast_math.h"
#include "cpu/kernels/kernels.h"

// Outputs may alias inputs only index-for-index, which creates no loop-carried dependence; this
// says so, since with seven pointers the compiler gives up on runtime alias checks and would
// leave the loop scalar (about 2x slower for AdamW). IEEE sqrt/div give the same bits either way.
#if defined(__clang__)
#define DTC_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define DTC_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#else
#define DTC_INDEPENDENT_ITERATIONS
#endif

namespace dtc::cpu {
namespace {

constexpr int64_t kGrain = 16384;

struct AdamWScalars {
  float decayFactor, beta1, oneMinusBeta1, beta2, oneMinusBeta2, biasCorrection2Sqrt, eps, stepSize;
};

// Elements [begin, end), compiled per vector width: sqrt and division are most of the work, and
// AVX halves their cost per element. The file is built without FMA contraction, so every width
// gives the same bits.
DTC_VECTOR_CLONES void adamwChunk(const float* param, const float* grad, const float* m,
                                  const float* v, float* paramOut, float* mOut, float* vOut,
                                  int64_t begin, int64_t end, const AdamWScalars& s) {
  DTC_INDEPENDENT_ITERATIONS
  for (int64_t i = begin; i < end; ++i) {
    const float g = grad[i];
    const float p = param[i] * s.decayFactor;                   // param.mul_(1 − lr·wd)
    const float mi = s.beta1 * m[i] + s.oneMinusBeta1 * g;      // β1·m + (1−β1)·g
    const float vi = s.beta2 * v[i] + s.oneMinusBeta2 * g * g;  // v.mul_(β2).addcmul_(g, g, 1−β2)
    const float denom = std::sqrt(vi) / s.biasCorrection2Sqrt + s.eps;
    mOut[i] = mi;
    vOut[i] = vi;
    paramOut[i] = p - s.stepSize * mi / denom;  // param.addcdiv_(m, denom, −step_size)
  }
}

}  // namespace

void sgd(const float* param, const float* grad, const float* buf, float* paramOut, float* bufOut,
         int64_t n, float lr, float momentum, float weightDecay, ThreadPool& pool) {
  // torch skips the weight-decay add when it is 0 (so 0·inf never turns into NaN).
  const bool decay = weightDecay != 0.0f;
  const bool useMomentum = momentum != 0.0f;
  pool.parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    DTC_INDEPENDENT_ITERATIONS
    for (int64_t i = begin; i < end; ++i) {
      const float p = param[i];
      float g = grad[i];
      if (decay) g = g + weightDecay * p;
      if (useMomentum) {
        g = momentum * buf[i] + g;  // buf.mul_(momentum).add_(g), dampening 0
        bufOut[i] = g;
      }
      paramOut[i] = p - lr * g;
    }
  });
}

void adamw(const float* param, const float* grad, const float* m, const float* v, float* paramOut,
           float* mOut, float* vOut, int64_t n, float step, float lr, float beta1, float beta2,
           float eps, float weightDecay, ThreadPool& pool) {
  const double lrD = lr;
  const float decayFactor = static_cast<float>(1.0 - lrD * weightDecay);
  const float oneMinusBeta1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  const float oneMinusBeta2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  const double biasCorrection1 =
      1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double biasCorrection2 =
      1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const float stepSize = static_cast<float>(lrD / biasCorrection1);
  const float biasCorrection2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  const AdamWScalars s{decayFactor,         beta1, oneMinusBeta1, beta2, oneMinusBeta2,
                       biasCorrection2Sqrt, eps,   stepSize};
  pool.parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
    adamwChunk(param, grad, m, v, paramOut, mOut, vOut, begin, end, s);
  });
}

}  // namespace dtc::cpu
