// Mixed precision and dynamic loss scaling: casts (cpu/cpu_precision_table.cc's bindCast) and
// nonfinite_count, loss_scale_step and select (cpu/cpu_precision_table.cc), bit for bit the
// CPU's. The scalars stay on the device: loss_scale_step is one thread, select reads its
// predicate in the kernel, so a step never waits for the host.
#include "common.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

// Between two 16-bit types through f32, as the CPU (every bf16 and f16 value is exact in f32).
template <Float From, Float To>
__global__ void castKernel(const void* x, void* y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) store<To>(y, i, load<From>(x, i));
}

template <Float From>
cudaError_t castFrom(const void* x, void* y, Float to, int64_t n, cudaStream_t stream) {
  const unsigned blocks = blocksFor(n);
  switch (to) {
    case Float::kF32:
      castKernel<From, Float::kF32><<<blocks, kThreads, 0, stream>>>(x, y, n);
      break;
    case Float::kBF16:
      castKernel<From, Float::kBF16><<<blocks, kThreads, 0, stream>>>(x, y, n);
      break;
    case Float::kF16:
      castKernel<From, Float::kF16><<<blocks, kThreads, 0, stream>>>(x, y, n);
      break;
  }
  return cudaGetLastError();
}

// The pairs of one launch, by value: CUDA's 4 KiB of kernel parameters hold 128 descriptors (24
// bytes each) with their first blocks. Pair p owns blocks [firstBlock[p], firstBlock[p + 1]).
constexpr int kPairsPerLaunch = 128;
struct CastLaunch {
  CastPair pairs[kPairsPerLaunch];
  int firstBlock[kPairsPerLaunch + 1];
  int count;
};
static_assert(sizeof(CastLaunch) <= 4096, "a launch's descriptors must fit in the parameters");

template <Float From, Float To>
__global__ void multiTensorCastKernel(const CastLaunch launch) {
  const int block = static_cast<int>(blockIdx.x);
  int p = 0;
  while (p + 1 < launch.count && launch.firstBlock[p + 1] <= block) ++p;
  const CastPair& pair = launch.pairs[p];
  const int64_t stride =
      static_cast<int64_t>(launch.firstBlock[p + 1] - launch.firstBlock[p]) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(block - launch.firstBlock[p]) * blockDim.x + threadIdx.x;
       i < pair.n; i += stride)
    store<To>(pair.y, i, load<From>(pair.x, i));
}

template <Float From, Float To>
cudaError_t multiTensorCastAs(const std::vector<CastPair>& pairs, cudaStream_t stream) {
  // Every thread at least four elements: casts are memory-bound.
  constexpr int kElementsPerThread = 4;
  size_t p = 0;
  while (p < pairs.size()) {
    CastLaunch launch{};
    int blocks = 0;
    for (; p < pairs.size() && launch.count < kPairsPerLaunch; ++p) {
      if (pairs[p].n <= 0) continue;
      launch.pairs[launch.count] = pairs[p];
      launch.firstBlock[launch.count] = blocks;
      blocks += static_cast<int>(blocksFor(pairs[p].n, kThreads * kElementsPerThread));
      ++launch.count;
    }
    if (launch.count == 0) continue;
    launch.firstBlock[launch.count] = blocks;
    multiTensorCastKernel<From, To><<<blocks, kThreads, 0, stream>>>(launch);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <Float From>
cudaError_t multiTensorCastFrom(const std::vector<CastPair>& pairs, Float to, cudaStream_t stream) {
  switch (to) {
    case Float::kF32: return multiTensorCastAs<From, Float::kF32>(pairs, stream);
    case Float::kBF16: return multiTensorCastAs<From, Float::kBF16>(pairs, stream);
    case Float::kF16: return multiTensorCastAs<From, Float::kF16>(pairs, stream);
  }
  return cudaErrorInvalidValue;
}

// Per block: the count of its grid-stride share of x, in a fixed tree (integers: any order
// gives the same count anyway).
__global__ void nonfiniteCountKernel(const float* x, int64_t n, long long* partial) {
  long long count = 0;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) count += isfinite(x[i]) ? 0 : 1;
  count = blockSum(count);
  if (threadIdx.x == 0) partial[blockIdx.x] = count;
}

__global__ void nonfiniteTotalKernel(const long long* partial, int blocks, float* count) {
  long long total = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) total += partial[b];
  total = blockSum(total);
  if (threadIdx.x == 0)
    *count = static_cast<float>(total);  // as the CPU's static_cast of its int64
}

// Per block: the sum of squares of its grid-stride share of x, in double.
__global__ void sumSquaresKernel(const float* x, int64_t n, double* partial) {
  double s = 0;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) s += static_cast<double>(x[i]) * x[i];
  s = blockSum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sumSquaresTotalKernel(const double* partial, int blocks, float* sum) {
  double total = 0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) total += partial[b];
  total = blockSum(total);
  if (threadIdx.x == 0) *sum = static_cast<float>(total);
}

// clip_grad_norm_'s norm and coefficient in f32 (exec/precision_contracts.h's clipCoefficient).
__global__ void clipCoefficientKernel(const float* squares, float* norm, float* coef,
                                      float maxNorm) {
  const float n = sqrtf(*squares);
  *norm = n;
  if (maxNorm == 0.0f) {
    *coef = 1.0f;
  } else {
    const float c = maxNorm / (n + 1e-6f);
    *coef = c < 1.0f ? c : 1.0f;
  }
}

// GradScaler's update in f32, in the CPU's operations and order. Every input is read before any
// output is written: the new scale and good-step count overwrite their state in place.
__global__ void lossScaleStepKernel(const float* scale, const float* good, const float* nonfinite,
                                    float* keep, float* inv, float* newScale, float* newGood,
                                    float interval, float growth, float backoff) {
  const float s = *scale, g = *good;
  const bool overflow = *nonfinite > 0;
  float nextScale = s, nextGood = g + 1;
  if (overflow) {
    nextScale = s * backoff;
    nextGood = 0.0f;
  } else if (g + 1 >= interval) {
    nextScale = s * growth;
    nextGood = 0.0f;
  }
  *inv = 1.0f / s;  // IEEE division (no fast math): the CPU's 1.0f / s
  *keep = overflow ? 0.0f : 1.0f;
  *newScale = nextScale;
  *newGood = nextGood;
}

// y = pred != 0 ? onTrue : onFalse. When the chosen tensor is y itself (y aliases on_false, the
// planner's in-place form), every thread returns at once.
__global__ void selectKernel(const float* pred, const float* onTrue, const float* onFalse, float* y,
                             int64_t n) {
  const float* from = *pred != 0 ? onTrue : onFalse;
  if (from == y) return;
  for (int64_t i = globalIndex(); i < n; i += globalStride()) y[i] = from[i];
}

}  // namespace

__global__ void int64ToF32Kernel(const int64_t* x, float* y, int64_t n) {
  for (int64_t i = globalIndex(); i < n; i += globalStride()) y[i] = static_cast<float>(x[i]);
}

cudaError_t int64ToF32(const int64_t* x, float* y, int64_t n, cudaStream_t stream) {
  if (n > 0) int64ToF32Kernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t cast(const void* x, Float from, void* y, Float to, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaGetLastError();
  if (from == to) {
    if (x == y) return cudaGetLastError();
    return cudaMemcpyAsync(y, x, n * (from == Float::kF32 ? 4 : 2), cudaMemcpyDeviceToDevice,
                           stream);
  }
  switch (from) {
    case Float::kF32: return castFrom<Float::kF32>(x, y, to, n, stream);
    case Float::kBF16: return castFrom<Float::kBF16>(x, y, to, n, stream);
    case Float::kF16: return castFrom<Float::kF16>(x, y, to, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t multiTensorCast(const std::vector<CastPair>& pairs, Float from, Float to,
                            cudaStream_t stream) {
  if (from == to) {  // copies, as cast() makes them
    const int64_t size = from == Float::kF32 ? 4 : 2;
    for (const CastPair& p : pairs)
      if (p.n > 0 && p.x != p.y)
        if (cudaError_t e = cudaMemcpyAsync(p.y, p.x, p.n * size, cudaMemcpyDeviceToDevice, stream);
            e != cudaSuccess)
          return e;
    return cudaGetLastError();
  }
  switch (from) {
    case Float::kF32: return multiTensorCastFrom<Float::kF32>(pairs, to, stream);
    case Float::kBF16: return multiTensorCastFrom<Float::kBF16>(pairs, to, stream);
    case Float::kF16: return multiTensorCastFrom<Float::kF16>(pairs, to, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t nonfiniteCount(const float* x, int64_t n, float* count, long long* partial,
                           cudaStream_t stream) {
  const int blocks = static_cast<int>(std::min<int64_t>(kSumBlocks, blocksFor(n)));
  nonfiniteCountKernel<<<blocks, kThreads, 0, stream>>>(x, n, partial);
  nonfiniteTotalKernel<<<1, kThreads, 0, stream>>>(partial, blocks, count);
  return cudaGetLastError();
}

cudaError_t sumSquares(const float* x, int64_t n, float* sum, double* partial,
                       cudaStream_t stream) {
  const int blocks =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(kSumBlocks, blocksFor(n))));
  sumSquaresKernel<<<blocks, kThreads, 0, stream>>>(x, n, partial);
  sumSquaresTotalKernel<<<1, kThreads, 0, stream>>>(partial, blocks, sum);
  return cudaGetLastError();
}

cudaError_t clipCoefficient(const float* squares, float* norm, float* coef, float maxNorm,
                            cudaStream_t stream) {
  clipCoefficientKernel<<<1, 1, 0, stream>>>(squares, norm, coef, maxNorm);
  return cudaGetLastError();
}

cudaError_t lossScaleStep(const float* scale, const float* good, const float* nonfinite,
                          float* keep, float* inv, float* newScale, float* newGood, float interval,
                          float growth, float backoff, cudaStream_t stream) {
  lossScaleStepKernel<<<1, 1, 0, stream>>>(scale, good, nonfinite, keep, inv, newScale, newGood,
                                           interval, growth, backoff);
  return cudaGetLastError();
}

cudaError_t select(const float* pred, const float* onTrue, const float* onFalse, float* y,
                   int64_t n, cudaStream_t stream) {
  if (n > 0) selectKernel<<<blocksFor(n), kThreads, 0, stream>>>(pred, onTrue, onFalse, y, n);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
