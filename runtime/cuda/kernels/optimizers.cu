// SGD and AdamW for one tensor (cpu/kernels/optimizers.cc): step-level scalars in double rounded to
// float once, element-wise math in float, in the same order as the CPU (and no FMA contraction,
// see CMakeLists.txt), so updates match it bit for bit where the libm functions agree. Each
// element is read before it is written: outputs may alias inputs.
#include <cmath>

#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

__global__ void sgdKernel(const float* param, const float* grad, const float* buf, float* paramOut,
                          float* bufOut, int64_t n, const float* lrValue, float momentum,
                          float weightDecay) {
  // torch skips the weight-decay add when it is 0 (so 0·inf never turns into NaN).
  const bool decay = weightDecay != 0.0f, useMomentum = momentum != 0.0f;
  const float lr = *lrValue;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float p = param[i];
    float g = grad[i];
    if (decay) g = g + weightDecay * p;
    if (useMomentum) {
      g = momentum * buf[i] + g;
      bufOut[i] = g;
    }
    paramOut[i] = p - lr * g;
  }
}

struct AdamwScalars {
  float oneMinusBeta1, oneMinusBeta2, beta1, beta2, eps, weightDecay;
};

__global__ void adamwKernel(const float* param, const float* grad, const float* m, const float* v,
                            float* paramOut, float* mOut, float* vOut, int64_t n,
                            const float* stepCount, const float* lrValue, AdamwScalars k) {
  // The bias corrections depend on the step counter and the step size on the learning rate,
  // which live on the device (the plan increments the one, the runtime sets the other): one
  // thread per block derives them.
  __shared__ float stepSize, biasCorrection2Sqrt, decayFactor;
  if (threadIdx.x == 0) {
    const double step = static_cast<double>(*stepCount);
    const double lr = static_cast<double>(*lrValue);
    const double biasCorrection1 = 1.0 - pow(static_cast<double>(k.beta1), step);
    const double biasCorrection2 = 1.0 - pow(static_cast<double>(k.beta2), step);
    stepSize = static_cast<float>(lr / biasCorrection1);
    biasCorrection2Sqrt = static_cast<float>(sqrt(biasCorrection2));
    decayFactor = static_cast<float>(1.0 - lr * k.weightDecay);
  }
  __syncthreads();
  for (int64_t i = globalIndex(); i < n; i += globalStride()) {
    const float g = grad[i];
    const float p = param[i] * decayFactor;
    const float mi = k.beta1 * m[i] + k.oneMinusBeta1 * g;
    const float vi = k.beta2 * v[i] + k.oneMinusBeta2 * g * g;
    const float denom = sqrtf(vi) / biasCorrection2Sqrt + k.eps;
    mOut[i] = mi;
    vOut[i] = vi;
    paramOut[i] = p - stepSize * mi / denom;
  }
}

}  // namespace

cudaError_t sgd(const float* param, const float* grad, const float* buf, float* paramOut,
                float* bufOut, int64_t n, const float* lr, float momentum, float weightDecay,
                cudaStream_t stream) {
  if (n > 0)
    sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(param, grad, buf, paramOut, bufOut, n, lr,
                                                     momentum, weightDecay);
  return cudaGetLastError();
}

cudaError_t adamw(const float* param, const float* grad, const float* m, const float* v,
                  float* paramOut, float* mOut, float* vOut, int64_t n, const float* step,
                  const float* lr, float beta1, float beta2, float eps, float weightDecay,
                  cudaStream_t stream) {
  AdamwScalars k;
  k.weightDecay = weightDecay;
  k.oneMinusBeta1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  k.oneMinusBeta2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  k.beta1 = beta1;
  k.beta2 = beta2;
  k.eps = eps;
  if (n > 0)
    adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(param, grad, m, v, paramOut, mOut, vOut, n,
                                                       step, lr, k);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
