// The ConvNet's layout kernels (cpu/kernels/conv.cc, cpu/kernels/pool.cc): im2col and its adjoint
// around the cuBLAS GEMMs of conv2d, the batch sum of per-sample weight gradients, and max pooling.
// The scatter-adds of the CPU (col2im, the pooling gradient) are gathers here, one thread per
// output pixel adding its contributions in the CPU's order: the same bits, no atomics.
#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

__global__ void im2colKernel(const float* x, float* col, ConvDims g, int64_t total) {
  const int64_t p = g.oh * g.ow, k = g.c * g.kh * g.kw;
  for (int64_t e = globalIndex(); e < total; e += globalStride()) {
    const int64_t s = e / (k * p), row = (e / p) % k, at = e % p;
    const int64_t c = row / (g.kh * g.kw), i = (row / g.kw) % g.kh, j = row % g.kw;
    const int64_t iy = (at / g.ow) * g.sh - g.ph + i, ix = (at % g.ow) * g.sw - g.pw + j;
    col[e] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[((s * g.c + c) * g.h + iy) * g.w + ix]
                                                        : 0.0f;
  }
}

__global__ void col2imKernel(const float* col, float* dx, ConvDims g, int64_t total) {
  const int64_t p = g.oh * g.ow, k = g.c * g.kh * g.kw;
  for (int64_t e = globalIndex(); e < total; e += globalStride()) {
    const int64_t ix = e % g.w, iy = (e / g.w) % g.h, c = (e / (g.w * g.h)) % g.c,
                  s = e / (g.w * g.h * g.c);
    const float* sample = col + s * k * p;
    float acc = 0.0f;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ty = iy + g.ph - i;  // = y·sh for the output row y that reads (iy, ix) at i
      if (ty < 0 || ty % g.sh) continue;
      const int64_t y = ty / g.sh;
      if (y >= g.oh) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tx = ix + g.pw - j;
        if (tx < 0 || tx % g.sw) continue;
        const int64_t xo = tx / g.sw;
        if (xo >= g.ow) continue;
        acc += sample[((c * g.kh + i) * g.kw + j) * p + y * g.ow + xo];
      }
    }
    dx[e] = acc;
  }
}

__global__ void sumBatchesKernel(const float* parts, int64_t batches, int64_t count, float* out) {
  for (int64_t e = globalIndex(); e < count; e += globalStride()) {
    double s = 0;
    for (int64_t b = 0; b < batches; ++b) s += parts[b * count + e];
    out[e] = static_cast<float>(s);
  }
}

// Offset (within one [H, W] plane) of the first maximum of output pixel (y, x)'s window.
__device__ int64_t argmaxInWindow(const float* plane, const PoolDims& g, int64_t y, int64_t x) {
  int64_t best = (y * g.sh) * g.w + x * g.sw;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t at = (y * g.sh + i) * g.w + x * g.sw + j;
      if (plane[at] > plane[best]) best = at;
    }
  return best;
}

__global__ void maxPoolKernel(const float* x, float* y, PoolDims g, int64_t total) {
  for (int64_t e = globalIndex(); e < total; e += globalStride()) {
    const int64_t ox = e % g.ow, oy = (e / g.ow) % g.oh, plane = e / (g.ow * g.oh);
    const float* in = x + plane * g.h * g.w;
    y[e] = in[argmaxInWindow(in, g, oy, ox)];
  }
}

__global__ void maxPoolGradKernel(const float* dy, const float* x, float* dx, PoolDims g,
                                  int64_t total) {
  for (int64_t e = globalIndex(); e < total; e += globalStride()) {
    const int64_t ix = e % g.w, iy = (e / g.w) % g.h, plane = e / (g.w * g.h);
    const float* in = x + plane * g.h * g.w;
    const float* grad = dy + plane * g.oh * g.ow;
    // The windows holding (iy, ix), in the CPU's (row, column) order.
    const int64_t y0 = iy - g.kh + 1 <= 0 ? 0 : (iy - g.kh + 1 + g.sh - 1) / g.sh;
    const int64_t y1 = min(g.oh - 1, iy / g.sh);
    const int64_t x0 = ix - g.kw + 1 <= 0 ? 0 : (ix - g.kw + 1 + g.sw - 1) / g.sw;
    const int64_t x1 = min(g.ow - 1, ix / g.sw);
    const int64_t self = iy * g.w + ix;
    float acc = 0.0f;
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox)
        if (argmaxInWindow(in, g, oy, ox) == self) acc += grad[oy * g.ow + ox];
    dx[e] = acc;
  }
}

}  // namespace

cudaError_t im2col(const float* x, float* col, const ConvDims& g, cudaStream_t stream) {
  const int64_t total = g.n * g.c * g.kh * g.kw * g.oh * g.ow;
  if (total > 0) im2colKernel<<<blocksFor(total), kThreads, 0, stream>>>(x, col, g, total);
  return cudaGetLastError();
}

cudaError_t col2im(const float* col, float* dx, const ConvDims& g, cudaStream_t stream) {
  const int64_t total = g.n * g.c * g.h * g.w;
  if (total > 0) col2imKernel<<<blocksFor(total), kThreads, 0, stream>>>(col, dx, g, total);
  return cudaGetLastError();
}

cudaError_t sumBatches(const float* parts, int64_t batches, int64_t count, float* out,
                       cudaStream_t stream) {
  if (count > 0)
    sumBatchesKernel<<<blocksFor(count), kThreads, 0, stream>>>(parts, batches, count, out);
  return cudaGetLastError();
}

cudaError_t maxPool2d(const float* x, float* y, const PoolDims& g, cudaStream_t stream) {
  const int64_t total = g.n * g.c * g.oh * g.ow;
  if (total > 0) maxPoolKernel<<<blocksFor(total), kThreads, 0, stream>>>(x, y, g, total);
  return cudaGetLastError();
}

cudaError_t maxPool2dGrad(const float* dy, const float* x, float* dx, const PoolDims& g,
                          cudaStream_t stream) {
  const int64_t total = g.n * g.c * g.h * g.w;
  if (total > 0) maxPoolGradKernel<<<blocksFor(total), kThreads, 0, stream>>>(dy, x, dx, g, total);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
