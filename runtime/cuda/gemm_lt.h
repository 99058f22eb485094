// One cuBLASLt matmul with a fused epilogue (bias, GELU), planned at bind time: descriptors,
// layouts and the heuristic's algorithm are made once, with the step's pointers, so a run is a
// single cublasLtMatmul on the stream (no allocation, no host synchronisation: a CUDA graph
// captures it).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cuda_device.h"
#include "support/status.h"

namespace dtc::cuda {

// In cuBLAS's column-major terms: D [m×n, ld m] = op(A) · op(B), then the epilogue; A is stored
// [k×m, ld k] when transposed, else [m×k, ld m]; B is [n×k, ld n] when transposed, else [k×n,
// ld k]. The products are summed in f32 and the bias and aux matrix are float32 whatever A, B and
// D are: the epilogue runs on the f32 sum, and a 16-bit D is that result rounded once. The
// BGRADB epilogue writes Σ over k of op(B) (one per column of D) to `biasGrad` instead.
struct LtGemmSpec {
  int64_t m = 0, n = 0, k = 0;  // all positive
  bool transA = false, transB = false;
  cudaDataType_t abType = CUDA_R_32F;  // A and B: CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F
  cudaDataType_t dType = CUDA_R_32F;   // D (and C): CUDA_R_32F, or abType when that is 16-bit
  bool tf32 = false;                   // only concerns float32 A and B
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const float* bias = nullptr;  // [m], for the BIAS epilogues
  // GELU's input in D's layout (ld m) and type: written by GELU_AUX_BIAS, read by DGELU.
  void* aux = nullptr;
  float* biasGrad = nullptr;  // [n], written by BGRADB
  // FP8 (compute capability 8.9 or newer): abType is A's CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2 and
  // fp8BType B's, and the device scalars aScale and bScale multiply the sum,
  // D = aScale·bScale·op(A)·op(B). cuBLASLt takes FP8 with A transposed and B not.
  cudaDataType_t fp8BType = CUDA_R_32F;
  const float* aScale = nullptr;
  const float* bScale = nullptr;
};

class LtGemm {
 public:
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // Enqueues the matmul on `stream`.
  Status run(cudaStream_t stream, const std::string& where) const;

 private:
  friend StatusOr<std::shared_ptr<const LtGemm>> planLtGemm(Device&, const LtGemmSpec&, const void*,
                                                            const void*, void*, const std::string&);
  LtGemm() = default;
  cublasLtHandle_t handle_ =
      nullptr;  // the process's for this GPU, never destroyed (see gemm_lt.cc)
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  const void* aData_ = nullptr;
  const void* bData_ = nullptr;
  void* dData_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspaceBytes_ = 0;
};

// The plan of `spec` on `a`, `b` and `d`, or null where cuBLASLt offers no algorithm for it on
// this GPU or refuses its types (the caller then runs the unfused form). Errors are the library
// failing, or memory.
// The workspace the algorithm asks for is the Device's GEMM workspace (Device::blasWorkspace, set
// before any GEMM step is bound), which cuBLAS's GEMMs use between its matmuls.
StatusOr<std::shared_ptr<const LtGemm>> planLtGemm(Device& device, const LtGemmSpec& spec,
                                                   const void* a, const void* b, void* d,
                                                   const std::string& where);

}  // namespace dtc::cuda
