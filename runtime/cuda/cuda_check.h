// CUDA and cuBLAS results as the runtime's Status values (errors are values, never aborts).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "support/status.h"

namespace dtc::cuda {

// `what` says what was attempted ("cudaMalloc of 4096 bytes", "matmul at fc0: the GEMM").
inline Status cudaStatus(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return Status::Ok();
  return Status::Internal(what + " failed: " + cudaGetErrorName(error) + " (" +
                          cudaGetErrorString(error) + ")");
}

inline Status cublasStatus(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Internal(what + " failed: " + cublasGetStatusName(status) + " (" +
                          cublasGetStatusString(status) + ")");
}

// After a kernel launch (launchers return cudaGetLastError()): a bad launch configuration, or an
// earlier asynchronous failure that the launch reports.
inline Status launched(cudaError_t error, const std::string& where) {
  return cudaStatus(error, where + "the kernel launch");
}

}  // namespace dtc::cuda
