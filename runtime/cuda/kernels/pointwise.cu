// The pointwise kernels of ops/kernels.def (DTC_POINTWISE), instantiated from their scalar math
// (ops/pointwise_math.h), the same expressions the CPU backend evaluates. Every thread reads
// element i before writing it, so outputs may alias inputs.
#include "common.cuh"
#include "launchers.h"
#include "ops/pointwise_math.h"

namespace dtc::cuda::kernels {
namespace {

template <typename Math>
__global__ void pointwiseKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) y[i] = Math::forward(x[i]);
}

template <typename Math>
__global__ void pointwiseGradKernel(const float* dy, const float* at, float* dx, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) dx[i] = Math::gradient(dy[i], at[i]);
}

}  // namespace

template <typename Math>
cudaError_t pointwise(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) pointwiseKernel<Math><<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

template <typename Math>
cudaError_t pointwiseGrad(const float* dy, const float* at, float* dx, int64_t n,
                          cudaStream_t stream) {
  if (n > 0) pointwiseGradKernel<Math><<<blocksFor(n), kThreads, 0, stream>>>(dy, at, dx, n);
  return cudaGetLastError();
}

#define DTC_POINTWISE(name, code, grad_name, grad_code, Math)                                  \
  template cudaError_t pointwise<dtc::pointwise::Math>(const float*, float*, int64_t,          \
                                                       cudaStream_t);                          \
  template cudaError_t pointwiseGrad<dtc::pointwise::Math>(const float*, const float*, float*, \
                                                           int64_t, cudaStream_t);
#include "ops/kernels.def"

}  // namespace dtc::cuda::kernels
