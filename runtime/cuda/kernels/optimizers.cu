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

// The step's scalars of AdamW, which depend on the step counter and the learning rate: both live
// on the device (the plan increments the one, the runtime sets the other), so one thread per
// block derives them.
struct AdamwStepScalars {
  float stepSize, biasCorrection2Sqrt, decayFactor;
};

__device__ void adamwStepScalars(const float* stepCount, const float* lrValue,
                                 const AdamwScalars& k, AdamwStepScalars& out) {
  if (threadIdx.x == 0) {
    const double step = static_cast<double>(*stepCount);
    const double lr = static_cast<double>(*lrValue);
    const double biasCorrection1 = 1.0 - pow(static_cast<double>(k.beta1), step);
    const double biasCorrection2 = 1.0 - pow(static_cast<double>(k.beta2), step);
    out.stepSize = static_cast<float>(lr / biasCorrection1);
    out.biasCorrection2Sqrt = static_cast<float>(sqrt(biasCorrection2));
    out.decayFactor = static_cast<float>(1.0 - lr * k.weightDecay);
  }
  __syncthreads();
}

// Elements first, first + stride, … below n of one tensor.
__device__ void adamwElements(const float* param, const float* grad, const float* m, const float* v,
                              float* paramOut, float* mOut, float* vOut, int64_t first,
                              int64_t stride, int64_t n, const AdamwScalars& k,
                              const AdamwStepScalars& s) {
  for (int64_t i = first; i < n; i += stride) {
    const float g = grad[i];
    const float p = param[i] * s.decayFactor;
    const float mi = k.beta1 * m[i] + k.oneMinusBeta1 * g;
    const float vi = k.beta2 * v[i] + k.oneMinusBeta2 * g * g;
    const float denom = sqrtf(vi) / s.biasCorrection2Sqrt + k.eps;
    mOut[i] = mi;
    vOut[i] = vi;
    paramOut[i] = p - s.stepSize * mi / denom;
  }
}

__global__ void adamwKernel(const float* param, const float* grad, const float* m, const float* v,
                            float* paramOut, float* mOut, float* vOut, int64_t n,
                            const float* stepCount, const float* lrValue, AdamwScalars k) {
  __shared__ AdamwStepScalars s;
  adamwStepScalars(stepCount, lrValue, k, s);
  adamwElements(param, grad, m, v, paramOut, mOut, vOut, globalIndex(), globalStride(), n, k, s);
}

// The tensors of one launch, passed by value: CUDA's 4 KiB of kernel parameters hold 48
// descriptors (64 bytes each) with their first blocks. Tensor t owns blocks
// [firstBlock[t], firstBlock[t + 1]).
constexpr int kTensorsPerLaunch = 48;
struct AdamwLaunch {
  AdamwTensor tensors[kTensorsPerLaunch];
  int firstBlock[kTensorsPerLaunch + 1];
  int count;
};
static_assert(sizeof(AdamwLaunch) + sizeof(AdamwScalars) + 2 * sizeof(float*) <= 4096,
              "a launch's descriptors must fit in the kernel parameters");

__global__ void multiTensorAdamwKernel(const AdamwLaunch launch, const float* stepCount,
                                       const float* lrValue, AdamwScalars k) {
  __shared__ AdamwStepScalars s;
  adamwStepScalars(stepCount, lrValue, k, s);
  const int block = static_cast<int>(blockIdx.x);
  int t = 0;
  while (t + 1 < launch.count && launch.firstBlock[t + 1] <= block) ++t;
  const AdamwTensor& x = launch.tensors[t];
  const int blocks = launch.firstBlock[t + 1] - launch.firstBlock[t];
  const int64_t first =
      static_cast<int64_t>(block - launch.firstBlock[t]) * blockDim.x + threadIdx.x;
  adamwElements(x.param, x.grad, x.m, x.v, x.paramOut, x.mOut, x.vOut, first,
                static_cast<int64_t>(blocks) * blockDim.x, x.n, k, s);
}

AdamwScalars adamwScalars(float beta1, float beta2, float eps, float weightDecay) {
  AdamwScalars k;
  k.weightDecay = weightDecay;
  k.oneMinusBeta1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  k.oneMinusBeta2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  k.beta1 = beta1;
  k.beta2 = beta2;
  k.eps = eps;
  return k;
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
  const AdamwScalars k = adamwScalars(beta1, beta2, eps, weightDecay);
  if (n > 0)
    adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(param, grad, m, v, paramOut, mOut, vOut, n,
                                                       step, lr, k);
  return cudaGetLastError();
}

cudaError_t multiTensorAdamw(const std::vector<AdamwTensor>& tensors, const float* step,
                             const float* lr, float beta1, float beta2, float eps,
                             float weightDecay, cudaStream_t stream) {
  const AdamwScalars k = adamwScalars(beta1, beta2, eps, weightDecay);
  // Each tensor gets blocks of kThreads threads, every thread at least four elements (the
  // update is memory-bound: fewer, fuller blocks), and no more than adamw's own launch.
  constexpr int64_t kElementsPerThread = 4;
  size_t t = 0;
  while (t < tensors.size()) {
    AdamwLaunch launch{};
    int blocks = 0;
    for (; t < tensors.size() && launch.count < kTensorsPerLaunch; ++t) {
      if (tensors[t].n <= 0) continue;
      launch.tensors[launch.count] = tensors[t];
      launch.firstBlock[launch.count] = blocks;
      blocks += static_cast<int>(blocksFor(tensors[t].n, kThreads * kElementsPerThread));
      ++launch.count;
    }
    if (launch.count == 0) continue;
    launch.firstBlock[launch.count] = blocks;
    multiTensorAdamwKernel<<<blocks, kThreads, 0, stream>>>(launch, step, lr, k);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace dtc::cuda::kernels
