// transpose (cpu/layout.cc): a pure copy, so exact. split and concat are strided copies done
// with cudaMemcpy2DAsync by their binders.
#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

struct Permuted {
  int rank;
  int64_t outShape[kMaxDims], srcStride[kMaxDims];  // srcStride[d]: x's stride of out dim d
};

__global__ void transposeKernel(const float* x, float* out, Permuted p, int64_t total) {
  for (int64_t i = globalIndex(); i < total; i += globalStride()) {
    int64_t src = 0, rem = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      src += (rem % p.outShape[d]) * p.srcStride[d];
      rem /= p.outShape[d];
    }
    out[i] = x[src];
  }
}

}  // namespace

cudaError_t transpose(const float* x, const Shape& shape, const std::vector<int64_t>& perm, float* out,
                      cudaStream_t stream) {
  const int rank = static_cast<int>(shape.size());
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return cudaGetLastError();
  bool identity = true;
  for (int d = 0; d < rank; ++d) identity = identity && perm[d] == d;
  if (identity) return cudaMemcpyAsync(out, x, total * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  Permuted p;
  p.rank = rank;
  int64_t inStrides[kMaxDims], stride = 1;
  for (int d = rank; d-- > 0;) {
    inStrides[d] = stride;
    stride *= shape[d];
  }
  for (int d = 0; d < rank; ++d) {
    p.outShape[d] = shape[perm[d]];
    p.srcStride[d] = inStrides[perm[d]];
  }
  transposeKernel<<<blocksFor(total), kThreads, 0, stream>>>(x, out, p, total);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
