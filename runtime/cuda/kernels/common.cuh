// Shared device helpers of the kernels: launch shapes, grid-stride loops, block reductions.
// Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace dtc::cuda::kernels {

constexpr int kThreads = 256;
// Grid-stride kernels never need more blocks than this to fill an H100 (132 SMs).
constexpr int64_t kMaxBlocks = 8192;

inline unsigned blocksFor(int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min(kMaxBlocks, (n + threads - 1) / threads)));
}

// Threads for a kernel that gives one block to each row of `width` elements: enough to cover
// the row in one or a few passes, a whole number of warps, at most kThreads.
inline int rowThreads(int64_t width) {
  int64_t t = 32;
  while (t < width && t < kThreads) t *= 2;
  return static_cast<int>(t);
}

__device__ inline int64_t globalIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t globalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  // fmaxf would drop NaN; the CPU's std::max(m, x) keeps m when x is NaN, which this matches
  // for m; a NaN row gives NaN losses either way.
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

template <typename T, typename Op>
__device__ T warpReduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces one value per thread over the block (blockDim.x a multiple of 32, at most 1024) and
// returns the result to every thread. A fixed tree, so the result is deterministic. Contains
// __syncthreads: every thread of the block must call it.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warpReduce(v, op);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  v = static_cast<int>(threadIdx.x) < warps ? partial[threadIdx.x] : identity;
  if (warp == 0) v = warpReduce(v, op);
  if (threadIdx.x == 0) partial[0] = v;
  __syncthreads();
  const T result = partial[0];
  __syncthreads();  // partial may be reused by the next call
  return result;
}

template <typename T>
__device__ T blockSum(T v) {
  return blockReduce(v, SumOp{}, T(0));
}

__device__ inline float blockMax(float v) { return blockReduce(v, MaxOp{}, -INFINITY); }

}  // namespace dtc::cuda::kernels
