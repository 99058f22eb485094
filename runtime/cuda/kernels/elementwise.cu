// Element-wise kernels: broadcasting add/sub/mul, fill, activations and their gradients. Same
// formulas, in the same order, as cpu/kernels/broadcast_binary.cc and cpu/kernels/activations.cc;
// every thread reads element i before writing it, so outputs may alias inputs.
#include <algorithm>

#include "common.cuh"
#include "gelu.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

constexpr float kSqrtHalf = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

template <BinaryOp Op>
__device__ float apply(float x, float y) {
  return binaryMath<Op>(x, y);
}

// Rank <= 1 (equal shapes, or a scalar operand): no index arithmetic.
template <BinaryOp Op, bool ZeroB>
__global__ void binaryFlat(const float* a, int64_t sa, const float* b, int64_t sb, float* out,
                           int64_t total) {
  for (int64_t i = globalIndex(); i < total; i += globalStride())
    out[i] = apply<Op>(a[i * sa], ZeroB ? 0.0f : b[i * sb]);
}

template <BinaryOp Op, bool ZeroB>
__global__ void binaryStrided(const float* a, const float* b, float* out, BroadcastPlan p,
                              int64_t total) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t ao = 0, bo = 0, rem = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t idx = rem % p.dims[d];
      rem /= p.dims[d];
      ao += idx * p.aStrides[d];
      bo += idx * p.bStrides[d];
    }
    out[i] = apply<Op>(a[ao], ZeroB ? 0.0f : b[bo]);
  }
}

template <BinaryOp Op, bool ZeroB>
void launchBinary(const float* a, const float* b, float* out, const BroadcastPlan& p, int64_t total,
                  cudaStream_t stream) {
  const unsigned blocks = blocksFor(total);
  if (p.rank <= 1) {
    const int64_t sa = p.rank ? p.aStrides[0] : 0, sb = p.rank ? p.bStrides[0] : 0;
    binaryFlat<Op, ZeroB><<<blocks, kThreads, 0, stream>>>(a, sa, b, sb, out, total);
  } else {
    binaryStrided<Op, ZeroB><<<blocks, kThreads, 0, stream>>>(a, b, out, p, total);
  }
}

template <BinaryOp Op>
void launchBinary(const float* a, const float* b, float* out, const BroadcastPlan& p, int64_t total,
                  cudaStream_t stream) {
  if (b)
    launchBinary<Op, false>(a, b, out, p, total, stream);
  else
    launchBinary<Op, true>(a, b, out, p, total, stream);
}

// Strides of `shape` right-aligned to rank `rank`; missing or size-1 dimensions get 0.
std::vector<int64_t> broadcastStrides(const Shape& shape, size_t rank) {
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = shape.size(), o = rank; i-- > 0;) {
    --o;
    if (shape[i] != 1) strides[o] = stride;
    stride *= shape[i];
  }
  return strides;
}

__global__ void fillKernel(float* out, int64_t n, float value) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) out[i] = value;
}

__global__ void scaleKernel(const float* x, float* y, int64_t n, float factor) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) y[i] = factor * x[i];
}

__global__ void powKernel(const float* x, float* y, int64_t n, float exponent) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) y[i] = powf(x[i], exponent);
}

template <Activation F>
__global__ void activationKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float v = x[i];
    if constexpr (F == Activation::kRelu) {
      y[i] = v < 0.0f ? 0.0f : v;  // NaN propagates, as torch.relu
    } else if constexpr (F == Activation::kTanh) {
      y[i] = tanhf(v);
    } else if constexpr (F == Activation::kGeluTanh) {
      y[i] = geluTanh(v);
    } else {
      y[i] = 0.5f * v * (1.0f + erff(v * kSqrtHalf));
    }
  }
}

template <Activation F>
__global__ void activationGradKernel(const float* dy, const float* at, float* dx, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float v = at[i], g = dy[i];
    if constexpr (F == Activation::kRelu) {
      dx[i] = v > 0.0f ? g : 0.0f;  // the gradient at exactly 0 is 0
    } else if constexpr (F == Activation::kTanh) {
      dx[i] = g * (1.0f - v * v);  // v = tanh(x)
    } else if constexpr (F == Activation::kGeluTanh) {
      dx[i] = g * geluTanhDerivative(v);
    } else {
      const float cdf = 0.5f * (1.0f + erff(v * kSqrtHalf));
      const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
      dx[i] = g * (cdf + v * pdf);
    }
  }
}

}  // namespace

bool makeBroadcastPlan(const Shape& aShape, const Shape& bShape, const Shape& outShape,
                       BroadcastPlan& plan) {
  const size_t rank = outShape.size();
  const std::vector<int64_t> as = broadcastStrides(aShape, rank),
                             bs = broadcastStrides(bShape, rank);
  std::vector<int64_t> dims, aStrides, bStrides;  // innermost first
  for (size_t d = rank; d-- > 0;) {
    const int64_t size = outShape[d];
    if (size == 1) continue;
    if (!dims.empty()) {
      const int64_t inner = dims.back();
      if (as[d] == aStrides.back() * inner && bs[d] == bStrides.back() * inner) {
        dims.back() *= size;
        continue;
      }
    }
    dims.push_back(size);
    aStrides.push_back(as[d]);
    bStrides.push_back(bs[d]);
  }
  if (dims.size() > static_cast<size_t>(kMaxDims)) return false;
  plan.rank = static_cast<int>(dims.size());
  for (int d = 0; d < plan.rank; ++d) {
    const size_t from = dims.size() - 1 - d;
    plan.dims[d] = dims[from];
    plan.aStrides[d] = aStrides[from];
    plan.bStrides[d] = bStrides[from];
  }
  return true;
}

cudaError_t binary(BinaryOp op, const float* a, const float* b, float* out,
                   const BroadcastPlan& plan, int64_t total, cudaStream_t stream) {
  if (total <= 0) return cudaGetLastError();
  switch (op) {
    case BinaryOp::kAdd: launchBinary<BinaryOp::kAdd>(a, b, out, plan, total, stream); break;
    case BinaryOp::kSub: launchBinary<BinaryOp::kSub>(a, b, out, plan, total, stream); break;
    case BinaryOp::kMul: launchBinary<BinaryOp::kMul>(a, b, out, plan, total, stream); break;
    case BinaryOp::kDiv: launchBinary<BinaryOp::kDiv>(a, b, out, plan, total, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t fill(float* out, int64_t n, float value, cudaStream_t stream) {
  if (n > 0) fillKernel<<<blocksFor(n), kThreads, 0, stream>>>(out, n, value);
  return cudaGetLastError();
}

cudaError_t scale(const float* x, float* y, int64_t n, float factor, cudaStream_t stream) {
  if (n > 0) scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n, factor);
  return cudaGetLastError();
}

cudaError_t power(const float* x, float* y, int64_t n, float exponent, cudaStream_t stream) {
  if (n > 0) powKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n, exponent);
  return cudaGetLastError();
}

cudaError_t activation(Activation f, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaGetLastError();
  const unsigned blocks = blocksFor(n);
  switch (f) {
    case Activation::kRelu:
      activationKernel<Activation::kRelu><<<blocks, kThreads, 0, stream>>>(x, y, n);
      break;
    case Activation::kTanh:
      activationKernel<Activation::kTanh><<<blocks, kThreads, 0, stream>>>(x, y, n);
      break;
    case Activation::kGeluErf:
      activationKernel<Activation::kGeluErf><<<blocks, kThreads, 0, stream>>>(x, y, n);
      break;
    case Activation::kGeluTanh:
      activationKernel<Activation::kGeluTanh><<<blocks, kThreads, 0, stream>>>(x, y, n);
      break;
  }
  return cudaGetLastError();
}

cudaError_t activationGrad(Activation f, const float* dy, const float* at, float* dx, int64_t n,
                           cudaStream_t stream) {
  if (n <= 0) return cudaGetLastError();
  const unsigned blocks = blocksFor(n);
  switch (f) {
    case Activation::kRelu:
      activationGradKernel<Activation::kRelu><<<blocks, kThreads, 0, stream>>>(dy, at, dx, n);
      break;
    case Activation::kTanh:
      activationGradKernel<Activation::kTanh><<<blocks, kThreads, 0, stream>>>(dy, at, dx, n);
      break;
    case Activation::kGeluErf:
      activationGradKernel<Activation::kGeluErf><<<blocks, kThreads, 0, stream>>>(dy, at, dx, n);
      break;
    case Activation::kGeluTanh:
      activationGradKernel<Activation::kGeluTanh><<<blocks, kThreads, 0, stream>>>(dy, at, dx, n);
      break;
  }
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
