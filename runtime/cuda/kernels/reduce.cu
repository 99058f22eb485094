// reduce_sum over any axes (cpu/kernels/reduce.cc): sums accumulate in double, and every split of a
// sum into partials depends only on the shape, so results are deterministic. A long sum is cut
// into `chunks` partial sums (written as doubles) added in chunk order by a second kernel.
#include <algorithm>

#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

// Element offset of the row-major multi-index `i` over `d`.
__device__ inline int64_t offsetOf(int64_t i, const Dims& d) {
  int64_t off = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    off += (i % d.size[k]) * d.stride[k];
    i /= d.size[k];
  }
  return off;
}

// Innermost run reduced: block task (output o, chunk c) sums its slice of o's runs.
__global__ void sumRuns(const float* x, ReducePlan p, int64_t perChunk, double* partial,
                        float* out) {
  const int64_t runs = count(p.reduced), work = runs * p.inner, tasks = p.outputs * p.chunks;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t o = task / p.chunks, c = task % p.chunks;
    const float* base = x + offsetOf(o, p.kept);
    const int64_t end = min(work, (c + 1) * perChunk);
    double s = 0;
    if (runs == 1) {
      for (int64_t e = c * perChunk + threadIdx.x; e < end; e += blockDim.x) s += base[e];
    } else {
      for (int64_t e = c * perChunk + threadIdx.x; e < end; e += blockDim.x)
        s += base[offsetOf(e / p.inner, p.reduced) + e % p.inner];
    }
    s = blockSum(s);
    if (threadIdx.x == 0) {
      if (p.chunks == 1)
        out[o] = static_cast<float>(s);
      else
        partial[c * p.outputs + o] = s;
    }
  }
}

// Innermost run kept: thread (kept row o, column j, chunk c) sums its rows of column j.
__global__ void sumColumns(const float* x, ReducePlan p, int64_t colBlocks, int64_t perChunk,
                           double* partial, float* out) {
  const int64_t rows = count(p.reduced), outRows = p.outputs / p.inner;
  const int64_t tasks = outRows * colBlocks * p.chunks;
  for (int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const int64_t c = task % p.chunks, rest = task / p.chunks;
    const int64_t o = rest / colBlocks, j = (rest % colBlocks) * blockDim.x + threadIdx.x;
    if (j >= p.inner) continue;
    const float* base = x + offsetOf(o, p.kept) + j;
    double s = 0;
    for (int64_t q = c * perChunk, end = min(rows, (c + 1) * perChunk); q < end; ++q)
      s += base[offsetOf(q, p.reduced)];
    const int64_t at = o * p.inner + j;
    if (p.chunks == 1)
      out[at] = static_cast<float>(s);
    else
      partial[c * p.outputs + at] = s;
  }
}

__global__ void sumChunks(const double* partial, int64_t chunks, int64_t outputs, float* out) {
  for (int64_t e = globalIndex(); e < outputs; e += globalStride()) {
    double s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * outputs + e];
    out[e] = static_cast<float>(s);
  }
}

}  // namespace

cudaError_t reduceSum(const float* x, float* out, const ReducePlan& p, void* scratch,
                      cudaStream_t stream) {
  double* partial = static_cast<double*>(scratch);
  switch (p.kind) {
    case ReducePlan::kEmpty: break;
    case ReducePlan::kZeros: return cudaMemsetAsync(out, 0, p.outputs * sizeof(float), stream);
    case ReducePlan::kCopy:
      if (out != x)
        return cudaMemcpyAsync(out, x, p.total * sizeof(float), cudaMemcpyDeviceToDevice, stream);
      break;
    case ReducePlan::kInnerReduced: {
      const int64_t work = count(p.reduced) * p.inner, perChunk = (work + p.chunks - 1) / p.chunks;
      const int threads = rowThreads(perChunk);
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(p.outputs * p.chunks, 65535));
      sumRuns<<<blocks, threads, 0, stream>>>(x, p, perChunk, partial, out);
      break;
    }
    case ReducePlan::kInnerKept: {
      const int threads = rowThreads(p.inner);
      const int64_t colBlocks = (p.inner + threads - 1) / threads;
      const int64_t rows = count(p.reduced), perChunk = (rows + p.chunks - 1) / p.chunks;
      const int64_t tasks = p.outputs / p.inner * colBlocks * p.chunks;
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(tasks, 65535));
      sumColumns<<<blocks, threads, 0, stream>>>(x, p, colBlocks, perChunk, partial, out);
      break;
    }
  }
  if (p.chunks > 1 && (p.kind == ReducePlan::kInnerReduced || p.kind == ReducePlan::kInnerKept))
    sumChunks<<<blocksFor(p.outputs), kThreads, 0, stream>>>(partial, p.chunks, p.outputs, out);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
