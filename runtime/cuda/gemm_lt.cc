#include "gemm_lt.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "cuda_check.h"

namespace dtc::cuda {
namespace {

// One cuBLASLt handle per GPU for the process, made on first use (at bind time, with the GPU
// current). Never destroyed: bound steps of any backend on that GPU may hold it, and destroying
// it among static destructors would race the CUDA runtime's own teardown. A handle holds no
// device memory of ours, so a Device going away leaves nothing dangling.
StatusOr<cublasLtHandle_t> ltHandle(int ordinal) {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(ordinal);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t handle = nullptr;
  DTC_RETURN_IF_ERROR(cublasStatus(cublasLtCreate(&handle),
                                   "creating a cuBLASLt handle on GPU " + std::to_string(ordinal)));
  handles.emplace(ordinal, handle);
  return handle;
}

// The largest power of two (up to 256, the heuristic's default assumption) dividing p's
// address: the heuristic must not pick a kernel that needs more than the operands have.
uint32_t alignmentOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

template <typename T>
Status setDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value,
               const std::string& what) {
  return cublasStatus(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value), what);
}

template <typename T>
Status setPreference(cublasLtMatmulPreference_t preference,
                     cublasLtMatmulPreferenceAttributes_t attribute, const T& value,
                     const std::string& what) {
  return cublasStatus(
      cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value), what);
}

// The preference lives only through the heuristic's query.
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  ~Preference() {
    if (p) (void)cublasLtMatmulPreferenceDestroy(p);
  }
};

}  // namespace

LtGemm::~LtGemm() {
  for (cublasLtMatrixLayout_t layout : {a_, b_, d_})
    if (layout) (void)cublasLtMatrixLayoutDestroy(layout);
  if (desc_) (void)cublasLtMatmulDescDestroy(desc_);
}

Status LtGemm::run(cudaStream_t stream, const std::string& where) const {
  // Scale type CUDA_R_32F; host scalars are read when the call is made (or captured).
  const float one = 1.0f, zero = 0.0f;
  // β = 0: C is never read; it is D, with D's layout, as cuBLASLt requires of an in-place C.
  return cublasStatus(cublasLtMatmul(handle_, desc_, &one, aData_, a_, bData_, b_, &zero, dData_,
                                     d_, dData_, d_, &algo_, workspace_, workspaceBytes_, stream),
                      where + "the cuBLASLt matmul");
}

StatusOr<std::shared_ptr<const LtGemm>> planLtGemm(Device& device, const LtGemmSpec& spec,
                                                   const void* a, const void* b, void* d,
                                                   const std::string& where) {
  std::shared_ptr<LtGemm> plan(new LtGemm());
  DTC_ASSIGN_OR_RETURN(plan->handle_, ltHandle(device.ordinal()));
  plan->aData_ = a;
  plan->bData_ = b;
  plan->dData_ = d;
  const std::string what = where + "setting up the cuBLASLt matmul";

  const cublasComputeType_t compute =
      spec.tf32 && spec.abType == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  DTC_RETURN_IF_ERROR(
      cublasStatus(cublasLtMatmulDescCreate(&plan->desc_, compute, CUDA_R_32F), what));
  const int32_t opA = spec.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                opB = spec.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_TRANSA, opA, what));
  DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_TRANSB, opB, what));
  const uint32_t epilogue = spec.epilogue;
  DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, what));
  // The bias and aux element types default to D's (cublasLt.h on
  // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE and _EPILOGUE_AUX_DATA_TYPE): float32 for an f32 D, so they
  // are left alone there (setting them is refused for some type mixes). A 16-bit D keeps the bias
  // f32, so it sets that type; cublasLt.h names other types than D's only for IMMA and fp8 kernels,
  // so a refusal at the setting, the heuristic or the algorithm check below means the unfused form,
  // not an error. The pointers are set before the heuristic, which reads their alignment from them.
  const bool narrowD = spec.dType != CUDA_R_32F;
  const int32_t f32Type = CUDA_R_32F;  // "int32_t based on cudaDataType"
  const auto refused = [] { return std::shared_ptr<const LtGemm>(); };
  if (spec.bias) {
    const void* bias = spec.bias;
    DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, what));
    if (narrowD && !setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, f32Type, what).ok())
      return refused();
  }
  if (spec.biasGrad) {
    // The bias gradient is f32 (D's type: these steps' D is the f32 weight gradient).
    if (narrowD) return refused();
    void* biasGrad = spec.biasGrad;
    DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, biasGrad, what));
  }
  if (spec.aux) {
    // The aux matrix is D's type (the default; another type is documented for fp8 only).
    void* aux = spec.aux;
    const int64_t auxLd = spec.m;
    DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux, what));
    DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, auxLd, what));
  }

  if (spec.aScale) {
    const void* aScale = spec.aScale;
    const void* bScale = spec.bScale;
    DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, aScale, what));
    DTC_RETURN_IF_ERROR(setDesc(plan->desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, bScale, what));
  }
  const cudaDataType_t bType = spec.aScale ? spec.fp8BType : spec.abType;

  const uint64_t m = static_cast<uint64_t>(spec.m), n = static_cast<uint64_t>(spec.n),
                 k = static_cast<uint64_t>(spec.k);
  DTC_RETURN_IF_ERROR(
      cublasStatus(spec.transA ? cublasLtMatrixLayoutCreate(&plan->a_, spec.abType, k, m, spec.k)
                               : cublasLtMatrixLayoutCreate(&plan->a_, spec.abType, m, k, spec.m),
                   what));
  DTC_RETURN_IF_ERROR(cublasStatus(spec.transB
                                       ? cublasLtMatrixLayoutCreate(&plan->b_, bType, n, k, spec.n)
                                       : cublasLtMatrixLayoutCreate(&plan->b_, bType, k, n, spec.k),
                                   what));
  DTC_RETURN_IF_ERROR(
      cublasStatus(cublasLtMatrixLayoutCreate(&plan->d_, spec.dType, m, n, spec.m), what));

  Preference preference;
  DTC_RETURN_IF_ERROR(cublasStatus(cublasLtMatmulPreferenceCreate(&preference.p), what));
  DTC_RETURN_IF_ERROR(setPreference(preference.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                    static_cast<uint64_t>(device.blasWorkspaceBytes()), what));
  // In bytes, from the addresses: a 16-bit D (2-byte elements) may sit at any even address.
  const uint32_t alignA = alignmentOf(a), alignB = alignmentOf(b), alignD = alignmentOf(d);
  DTC_RETURN_IF_ERROR(
      setPreference(preference.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA, what));
  DTC_RETURN_IF_ERROR(
      setPreference(preference.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB, what));
  DTC_RETURN_IF_ERROR(
      setPreference(preference.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignD, what));
  DTC_RETURN_IF_ERROR(
      setPreference(preference.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignD, what));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t heuristic =
      cublasLtMatmulAlgoGetHeuristic(plan->handle_, plan->desc_, plan->a_, plan->b_, plan->d_,
                                     plan->d_, preference.p, 1, &result, &found);
  // NOT_SUPPORTED (or INVALID_VALUE, for a combination of types, epilogue and layouts this
  // version refuses) means no fused kernel here, not a failure.
  if (heuristic != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS)
    return refused();
  // The algorithm against the very descriptors, at bind time: the heuristic may not weigh every
  // attribute (the aux type is documented as checked by the matmul), and "if
  // cublasLtMatmulAlgoCheck fails, the algo will not run" (cublasLt.h).
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(plan->handle_, plan->desc_, plan->a_, plan->b_, plan->d_, plan->d_,
                              &result.algo, &check) != CUBLAS_STATUS_SUCCESS ||
      check.state != CUBLAS_STATUS_SUCCESS)
    return refused();
  plan->algo_ = result.algo;
  // The workspace is cuBLAS's (the Device's GEMM workspace): both libraries run their GEMMs on
  // the compute stream, one at a time. Split-K algorithms want some; the heuristic was told how
  // much there is (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES), and one asking more is not taken.
  const size_t workspaceBytes = std::max(result.workspaceSize, check.workspaceSize);
  if (workspaceBytes > device.blasWorkspaceBytes()) return refused();
  if (workspaceBytes > 0) {
    plan->workspace_ = device.blasWorkspace();
    plan->workspaceBytes_ = workspaceBytes;
  }
  return std::shared_ptr<const LtGemm>(std::move(plan));
}

}  // namespace dtc::cuda
