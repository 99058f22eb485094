// transpose (cpu/kernels/layout.cc): a pure copy, so exact, of 4-, 2- or 1-byte elements (f32;
// bf16/f16 after dtc-fold-casts; FP8 codes after their gather). split and concat are strided copies
// done with cudaMemcpy2DAsync by their binders.
#include "common.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

struct Permuted {
  int rank;
  int64_t outShape[kMaxDims], srcStride[kMaxDims];  // srcStride[d]: x's stride of out dim d
};

template <typename Element>
__global__ void transposeKernel(const Element* x, Element* out, Permuted p, int64_t total) {
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

cudaError_t transpose(const void* x, const Shape& shape, const std::vector<int64_t>& perm,
                      void* out, int elementBytes, cudaStream_t stream) {
  if (elementBytes != 4 && elementBytes != 2 && elementBytes != 1) return cudaErrorInvalidValue;
  const int rank = static_cast<int>(shape.size());
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  if (total == 0) return cudaGetLastError();
  bool identity = true;
  for (int d = 0; d < rank; ++d) identity = identity && perm[d] == d;
  if (identity)
    return cudaMemcpyAsync(out, x, total * elementBytes, cudaMemcpyDeviceToDevice, stream);
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
  if (elementBytes == 4)
    transposeKernel<<<blocksFor(total), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(x), static_cast<uint32_t*>(out), p, total);
  else if (elementBytes == 2)
    transposeKernel<<<blocksFor(total), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), p, total);
  else
    transposeKernel<<<blocksFor(total), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(x), static_cast<uint8_t*>(out), p, total);
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
