#include "gemm.h"

#include <algorithm>
#include <climits>

#include "cuda_check.h"

namespace dtc::cuda {

Status checkGemm(const GemmShape& s, const std::string& where) {
  const int64_t most = std::max({s.m, s.n, s.k, s.batch, s.m * s.k, s.k * s.n, s.m * s.n});
  if (s.m < 0 || s.n < 0 || s.k < 0 || most > INT_MAX)
    return Status::InvalidInput(where + "a GEMM of " + std::to_string(s.m) + "x" +
                                std::to_string(s.n) + "x" + std::to_string(s.k) + " (batch " +
                                std::to_string(s.batch) + ") is beyond cuBLAS's 32-bit sizes");
  return Status::Ok();
}

bool gemmType(DType dtype, cudaDataType_t& type) {
  switch (dtype) {
    case DType::kF32: type = CUDA_R_32F; return true;
    case DType::kBF16: type = CUDA_R_16BF; return true;
    case DType::kF16: type = CUDA_R_16F; return true;
    default: return false;
  }
}

Status gemm(cublasHandle_t handle, bool tf32, const void* a, const void* b, void* c,
            const GemmShape& s, const std::string& where) {
  if (s.m == 0 || s.n == 0 || s.batch == 0) return Status::Ok();
  cudaStream_t stream = nullptr;
  DTC_RETURN_IF_ERROR(cublasStatus(cublasGetStream(handle, &stream), where + "cublasGetStream"));
  const cudaDataType_t t = s.type, tc = s.f32Output ? CUDA_R_32F : s.type;
  const size_t elementBytes = tc == CUDA_R_32F ? sizeof(float) : 2;
  if (s.k == 0) {  // an empty sum; cuBLAS would reject the leading dimensions
    const int64_t strideC = s.strideC >= 0 ? s.strideC : s.m * s.n;
    return cudaStatus(
        cudaMemsetAsync(c, 0, ((s.batch - 1) * strideC + s.m * s.n) * elementBytes, stream),
        where + "zeroing");
  }
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  // Row-major leading dimensions: A is [M,K] or [K,M], B is [K,N] or [N,K], C is [M,N].
  const int lda = s.transA ? m : k, ldb = s.transB ? k : n;
  const cublasOperation_t opA = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  // 16-bit operands always accumulate in f32 (the tensor cores' native mode); TF32 only
  // concerns f32 operands.
  const cublasComputeType_t compute =
      tf32 && s.type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.0f,
              zero = 0.0f;  // scale type of CUBLAS_COMPUTE_32F: float, whatever A, B, C are
  cublasStatus_t status;
  if (s.batch == 1) {
    status = cublasGemmEx(handle, opB, opA, n, m, k, &one, b, t, ldb, a, t, lda, &zero, c, tc, n,
                          compute, CUBLAS_GEMM_DEFAULT);
  } else {
    const long long strideA = s.strideA >= 0 ? s.strideA : s.m * s.k;
    const long long strideB = s.strideB >= 0 ? s.strideB : s.k * s.n;
    const long long strideC = s.strideC >= 0 ? s.strideC : s.m * s.n;
    status = cublasGemmStridedBatchedEx(handle, opB, opA, n, m, k, &one, b, t, ldb, strideB, a, t,
                                        lda, strideA, &zero, c, tc, n, strideC,
                                        static_cast<int>(s.batch), compute, CUBLAS_GEMM_DEFAULT);
  }
  return cublasStatus(status, where + "the GEMM");
}

}  // namespace dtc::cuda
