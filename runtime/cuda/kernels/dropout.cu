// Dropout, forward and backward alike: y = x · keepScale(element's global index), the mask drawn
// from ops/dropout_math.h as the CPU draws it (cpu/kernels/dropout.cc). The (seed, step) pair is
// read from device memory when the kernel runs, so a captured graph replays each step's draw.
#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

__global__ void dropoutKernel(const float* x, float* y, int64_t n, const int64_t* rng,
                              dropout::Placement placement, uint64_t key, float ratio) {
  const uint64_t seed = static_cast<uint64_t>(rng[0]), step = static_cast<uint64_t>(rng[1]);
  for (int64_t i = globalIndex(); i < n; i += globalStride())
    y[i] = x[i] * dropout::keepScale(seed, step, key, dropout::globalIndex(placement, i), ratio);
}

}  // namespace

cudaError_t dropoutApply(const float* x, float* y, int64_t n, const int64_t* rng,
                         const dropout::Placement& placement, uint64_t key, float ratio,
                         cudaStream_t stream) {
  if (n > 0)
    dropoutKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n, rng, placement, key, ratio);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
