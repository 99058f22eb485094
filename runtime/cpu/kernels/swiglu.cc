// SwiGLU's gate silu(gate)·up, fused, and its gradients, element by element.
#include "cpu/kernels/swiglu.h"

#include <cmath>

namespace dtc::cpu {
namespace {

constexpr int64_t kGrainFloats = 8192;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void swiglu(const float* gate, const float* up, float* y, int64_t n, ThreadPool& pool) {
  pool.parallelFor(n, kGrainFloats, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = gate[i] * sigmoid(gate[i]) * up[i];
  });
}

void swigluGrad(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                int64_t n, ThreadPool& pool) {
  // d silu(g)/dg = s·(1 + g·(1 − s)), s = sigmoid(g).
  pool.parallelFor(n, kGrainFloats, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i], s = sigmoid(g);
      dup[i] = dy[i] * g * s;
      dgate[i] = dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
    }
  });
}

}  // namespace dtc::cpu
