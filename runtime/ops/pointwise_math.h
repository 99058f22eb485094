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

}  // namespace dtc::pointwise
