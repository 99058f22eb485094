// Rotary embeddings and their gradient (cpu/kernels/rotary.cc), each operand f32 or 16-bit.
#include "rotary.h"

#include "common.cuh"
#include "float_access.cuh"

namespace dtc::cuda::kernels {
namespace {

// One thread per pair (j, j + D/2) of a row; `heads` rows share a position.
__global__ void rotaryKernel(FloatIn x, FloatIn cos, FloatIn sin, FloatOut y, int64_t pairs,
                             int64_t t, int64_t d, int64_t heads, bool transpose) {
  const int64_t h = d / 2;
  for (int64_t i = globalIndex(); i < pairs; i += globalStride()) {
    const int64_t r = i / h, j = i % h, e = r * d + j, tab = ((r / heads) % t) * d + j;
    const float a = at(x, e), b = at(x, e + h);
    if (transpose) {
      put(y, e, a * at(cos, tab) + b * at(sin, tab + h));
      put(y, e + h, b * at(cos, tab + h) - a * at(sin, tab));
    } else {
      put(y, e, a * at(cos, tab) - b * at(sin, tab));
      put(y, e + h, b * at(cos, tab + h) + a * at(sin, tab + h));
    }
  }
}

}  // namespace

cudaError_t rotary(FloatIn x, FloatIn cos, FloatIn sin, FloatOut y, int64_t n, int64_t t, int64_t d,
                   int64_t heads, bool transpose, cudaStream_t stream) {
  const int64_t pairs = n / 2;
  if (pairs > 0 && d > 0 && t > 0 && heads > 0)
    rotaryKernel<<<blocksFor(pairs), kThreads, 0, stream>>>(x, cos, sin, y, pairs, t, d, heads,
                                                            transpose);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
