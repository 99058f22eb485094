// The scalar math of the pointwise kernels (DTC_POINTWISE in ops/kernels.def), compiled into
// both backends: the CPU's loops and the CUDA kernels are instantiated from these structs, so a
// new element-wise op is its formula here and one line in the registry.
//
// forward(x) is y = f(x); gradient(dy, at) is dx = dy · f'(x), where `at` is what the graph op's
// gradient rule passes: x, or y where f' is cheaper from the output. Single precision throughout,
// as PyTorch's float32 kernels.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define DTC_POINTWISE_FN __host__ __device__ inline
#else
#define DTC_POINTWISE_FN inline
#endif

namespace dtc::pointwise {

// torch.sigmoid. The gradient takes the output: σ'(x) = y (1 − y).
struct Sigmoid {
  static DTC_POINTWISE_FN float forward(float x) { return 1.0f / (1.0f + expf(-x)); }
  static DTC_POINTWISE_FN float gradient(float dy, float y) { return dy * y * (1.0f - y); }
};

// torch.nn.functional.silu: x σ(x). The gradient takes the input:
// d/dx x σ(x) = σ(x) (1 + x (1 − σ(x))).
struct Silu {
  static DTC_POINTWISE_FN float forward(float x) { return x / (1.0f + expf(-x)); }
  static DTC_POINTWISE_FN float gradient(float dy, float x) {
    const float s = 1.0f / (1.0f + expf(-x));
    return dy * s * (1.0f + x * (1.0f - s));
  }
};

// torch.exp; the gradient takes the output: y.
struct Exp {
  static DTC_POINTWISE_FN float forward(float x) { return expf(x); }
  static DTC_POINTWISE_FN float gradient(float dy, float y) { return dy * y; }
};

// torch.log; the gradient takes the input: 1 / x.
struct Log {
  static DTC_POINTWISE_FN float forward(float x) { return logf(x); }
  static DTC_POINTWISE_FN float gradient(float dy, float x) { return dy / x; }
};

// torch.sqrt; the gradient takes the output: 1 / (2 y), as PyTorch's grad / (2 · result).
struct Sqrt {
  static DTC_POINTWISE_FN float forward(float x) { return sqrtf(x); }
  static DTC_POINTWISE_FN float gradient(float dy, float y) { return dy / (2.0f * y); }
};

// torch.reciprocal; the gradient takes the output: −y², as PyTorch's −grad · (result · result).
struct Reciprocal {
  static DTC_POINTWISE_FN float forward(float x) { return 1.0f / x; }
  static DTC_POINTWISE_FN float gradient(float dy, float y) { return -dy * (y * y); }
};

// torch.erf; the gradient takes the input: 2/√π · exp(−x²).
struct Erf {
  static DTC_POINTWISE_FN float forward(float x) { return erff(x); }
  static DTC_POINTWISE_FN float gradient(float dy, float x) {
    return 1.1283791670955126f * expf(-x * x) * dy;
  }
};

// torch.abs; the gradient takes the input: sign(x), 0 at 0.
struct Abs {
  static DTC_POINTWISE_FN float forward(float x) { return fabsf(x); }
  static DTC_POINTWISE_FN float gradient(float dy, float x) {
    return x > 0.0f ? dy : x < 0.0f ? -dy : 0.0f;
  }
};

// torch.nn.functional.softplus (beta 1, threshold 20): log(1 + exp(x)), and x itself above the
// threshold, where the two agree in float32. The gradient takes the input: σ(x), 1 above it.
struct Softplus {
  static DTC_POINTWISE_FN float forward(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
  static DTC_POINTWISE_FN float gradient(float dy, float x) {
    if (x > 20.0f) return dy;
    const float z = expf(x);
    return dy * z / (z + 1.0f);
  }
};

}  // namespace dtc::pointwise
