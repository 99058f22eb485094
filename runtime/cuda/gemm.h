// Row-major GEMMs through cuBLAS (column-major): C = op(A)·op(B) is computed as
// Cᵀ = op(B)ᵀ·op(A)ᵀ, which cuBLAS sees as column-major op(B)·op(A) with the roles swapped.
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <string>

#include "support/dtype.h"
#include "support/status.h"

namespace dtc::cuda {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;  // C [M,N] = op(A) [M,K] · op(B) [K,N]
  bool transA = false, transB = false;
  int64_t batch = 1;  // batches of A, B and C, contiguous unless strides are given
  // Elements between batches (-1: contiguous, e.g. M·K for A; 0: one matrix shared by all).
  int64_t strideA = -1, strideB = -1, strideC = -1;
  // The element type of A, B and C alike: CUDA_R_32F, or CUDA_R_16BF / CUDA_R_16F for mixed
  // precision (products accumulated in f32 on the tensor cores, C rounded once, as the CPU's
  // widened contractions).
  cudaDataType_t type = CUDA_R_32F;
  // C in float32 whatever A and B are (the fused linear epilogues: a 16-bit product summed in f32
  // and kept so, never rounded to 16 bits before the bias and activation).
  bool f32Output = false;
};

// Whether cuBLAS's 32-bit sizes and strides hold the shape; an error naming it otherwise.
Status checkGemm(const GemmShape& s, const std::string& where);
// Enqueues the GEMM on the handle's stream. fp32 math (CUBLAS_COMPUTE_32F) unless `tf32` (which
// only concerns float32 operands). K == 0 gives zeros.
Status gemm(cublasHandle_t handle, bool tf32, const void* a, const void* b, void* c,
            const GemmShape& s, const std::string& where);
// The cuBLAS element type of a plan dtype: float32, bfloat16 or float16 (false for others).
bool gemmType(DType dtype, cudaDataType_t& type);

}  // namespace dtc::cuda
