// The fused linear epilogues on CUDA (cpu/cpu_epilogue_table.cc's linear_bias, linear_bias_gelu
// and linear_grad_input_gelu): one cuBLASLt matmul with the BIAS, GELU_AUX_BIAS or DGELU
// epilogue where cuBLASLt offers one, else the unfused form (a cuBLAS GEMM into an f32 buffer,
// then one element-wise pass, kernels/epilogue.cu). Which of the two is settled at bind time.
// Under mixed precision y (dx) may be x's (dy's) 16-bit type T (the compiler folds the narrowing
// cast after it into the op): the f32 result rounded once, as the CPU's widened path rounds it;
// the bias and pre stay f32. linear_grad_weight_bias sums the bias gradient beside the weight
// gradient's GEMM (cuBLASLt's BGRADB epilogue), else in a column-sum pass of its own.
//
// Row-major to cuBLAS's column-major: a row-major [R, C] matrix is a column-major C×R one with
// ld C. So y [rows, N] = x [rows, K] · w [N, K]ᵀ is D (N×rows, ld N) = op(A) · B with A = w
// stored K×N (ld K) and transposed, B = x stored K×rows (ld K); and dx [rows, K] = dy [rows, N] ·
// w [N, K] is D (K×rows, ld K) = A · B with A = w stored K×N (ld K), B = dy stored N×rows (ld N).
// cuBLASLt's bias runs along D's rows, one per output feature, as ours; the aux matrix (pre) has
// D's layout, [rows, n] row-major.
//
// DTC_CUDA_LT_EPILOGUES=0 runs every step unfused (bind time; the GPU tests check both forms).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cuda_bind.h"
#include "exec/linear_epilogue_contract.h"
#include "exec/precision_contracts.h"
#include "gemm.h"
#include "gemm_lt.h"
#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

bool ltEpiloguesEnabled() { return runtimeOptions().cudaLtEpilogues; }

struct Checked {
  LinearEpilogueShape shape;
  cudaDataType_t type = CUDA_R_32F;     // x's and w's (dy's and w's)
  cudaDataType_t yType = CUDA_R_32F;    // y's (dx's): f32, or `type` when that is 16-bit
  cudaDataType_t preType = CUDA_R_32F;  // pre's (the GELU's input): f32, or y's 16-bit type
};

// The CPU's contract and words first: its bindLowPrecision refuses two 16-bit types, then runs
// checkLinearEpilogue on widened operands. Then what the CPU takes by widening and the CUDA
// kernels do not: x and w of different types, a 16-bit bias, pre or dx, or a 16-bit y beside
// f32 operands.
StatusOr<Checked> checkEpilogue(const StepContext& ctx, LinearEpilogue kind) {
  DTC_RETURN_IF_ERROR(sharedLowPrecision(ctx).status());
  StepContext wide{ctx.step, ctx.inputs, ctx.outputs, ctx.pool, ctx.mesh};
  for (auto* list : {&wide.inputs, &wide.outputs})
    for (TensorView& t : *list)
      if (lowPrecision(t.dtype)) t.dtype = DType::kF32;
  Checked c;
  DTC_ASSIGN_OR_RETURN(c.shape, checkLinearEpilogue(wide, kind));
  const TensorView &a = ctx.inputs[0], &w = ctx.inputs[1], &third = ctx.inputs[2];
  if (a.dtype != w.dtype)
    return invalid(ctx, "operands must share one element type, got " + dtypeName(a.dtype) +
                            " and " + dtypeName(w.dtype));
  const bool forward = kind != LinearEpilogue::kGradInputGelu;
  const std::string beside = " must be float32 beside " + dtypeName(a.dtype) + " operands, got ";
  if (third.dtype != DType::kF32 && (forward || third.dtype != a.dtype))
    return invalid(ctx, (forward ? "the bias" : "pre") + beside + dtypeName(third.dtype));
  // Another 16-bit type than x's was refused above, so a 16-bit y here either is x's type or
  // stands beside f32 operands.
  const DType y = ctx.outputs[0].dtype;
  if (forward && lowPrecision(y) && y != a.dtype)
    return invalid(ctx, "a " + dtypeName(y) + " y needs " + dtypeName(y) + " x and w, got " +
                            dtypeName(a.dtype));
  if (!forward && y != DType::kF32 && y != a.dtype)
    return invalid(ctx, "dx" + beside + dtypeName(y));
  // pre may be x's 16-bit type (as torch.autocast keeps GELU's input).
  const DType pre = kind == LinearEpilogue::kBiasGelu        ? ctx.outputs[1].dtype
                    : kind == LinearEpilogue::kGradInputGelu ? third.dtype
                                                             : DType::kF32;
  if (pre != DType::kF32 && pre != a.dtype)
    return invalid(ctx, "a " + dtypeName(pre) + " pre needs " + dtypeName(pre) + " operands, got " +
                            dtypeName(a.dtype));
  if (!gemmType(a.dtype, c.type))
    return invalid(ctx, "no CUDA GEMM for " + dtypeName(a.dtype) + " operands");
  c.yType = y == DType::kF32 ? CUDA_R_32F : c.type;
  c.preType = pre == DType::kF32 ? CUDA_R_32F : c.type;
  return c;
}

kernels::Float floatOf(cudaDataType_t t) {
  return t == CUDA_R_16BF  ? kernels::Float::kBF16
         : t == CUDA_R_16F ? kernels::Float::kF16
                           : kernels::Float::kF32;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <LinearEpilogue Kind>
StatusOr<BoundStep> bindLinearEpilogue(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const Checked checked, checkEpilogue(ctx, Kind));
  const LinearEpilogueShape s = checked.shape;
  constexpr bool kForward = Kind != LinearEpilogue::kGradInputGelu;
  const std::string where = ctx.where();
  // The row-major GEMM of the unfused form: [rows, n] = x [rows, k] · w [n, k]ᵀ, or dy [rows, k]
  // · w [k, n]. The 32-bit limits are cuBLAS's for both forms (the `linear` ops' message).
  GemmShape gemmShape{s.rows, s.n, s.k, false, kForward, 1};
  gemmShape.type = checked.type;
  gemmShape.f32Output = true;
  DTC_RETURN_IF_ERROR(checkGemm(gemmShape, where));
  if (s.rows == 0 || s.n == 0) return BoundStep([] { return Status::Ok(); });

  const void* a = ctx.inputs[0].data;  // x, or dy
  const void* w = ctx.inputs[1].data;
  float* bias = kForward ? ctx.inputs[2].f32() : nullptr;
  void* y = ctx.outputs[0].data;  // y or dx (f32 or T)
  const bool narrowY = checked.yType != CUDA_R_32F;
  const kernels::Float yType = floatOf(checked.yType), preType = floatOf(checked.preType);
  // pre: written by linear_bias_gelu, read by the gradient (f32, or T with y).
  void* pre = Kind == LinearEpilogue::kBiasGelu        ? ctx.outputs[1].data
              : Kind == LinearEpilogue::kGradInputGelu ? ctx.inputs[2].data
                                                       : nullptr;
  void* aux = pre;
  const bool tf32 = dev.tf32();

  // cuBLASLt, where it can: an empty sum (k = 0) has no matmul to fuse into; the aux matrix's
  // leading dimension (n) must be a multiple of 8 (cublasLt.h); and the bias and aux pointers
  // are held to 16 bytes (misaligned biases have been seen to fail at run time), rather than
  // trusting every version's heuristic with them.
  // The tanh in cuBLASLt's GELU epilogues is the GPU's fast approximation (about 2e-4 relative):
  // within 16-bit operands' noise, not within f32's 1e-5 parity with the CPU. So f32 steps use
  // cuBLASLt for the bias alone (into pre) and run the GELU as our own pass with the CPU's math,
  // and an f32 GELU gradient takes the unfused form. The aux matrix (pre) is D's type: a 16-bit y
  // (dx) with a 16-bit pre fuses whole (as llm.c's), but beside an f32 pre it would need an aux
  // type other than D's, which cublasLt.h documents for fp8 only (and an unsupported one fails
  // only when the matmul runs): that linear_bias_gelu takes the bias from cuBLASLt (D = pre,
  // f32) and our GELU pass rounds y, and that gradient runs unfused. A 16-bit y of linear_bias is
  // D in T beside an f32 bias.
  const bool ltGelu = checked.type != CUDA_R_32F && checked.preType == checked.yType;
  if (!ltGelu) aux = nullptr;
  const bool ltShape = s.k > 0 && (!aux || (s.n % 8 == 0 && aligned16(aux))) &&
                       (!kForward || aligned16(bias)) &&
                       (ltGelu || Kind != LinearEpilogue::kGradInputGelu);
  if (ltEpiloguesEnabled() && ltShape) {
    LtGemmSpec spec;
    spec.m = s.n, spec.n = s.rows, spec.k = s.k;
    spec.transA = kForward;
    spec.abType = checked.type;
    // f32 linear_bias_gelu, or one with a 16-bit y beside an f32 pre: the biased sum goes to pre
    // (f32), our GELU pass makes y from it.
    const bool ownGelu = Kind == LinearEpilogue::kBiasGelu && !ltGelu;
    spec.dType = ownGelu ? CUDA_R_32F : checked.yType;
    spec.tf32 = tf32;
    spec.epilogue = Kind == LinearEpilogue::kBias ? CUBLASLT_EPILOGUE_BIAS
                    : Kind == LinearEpilogue::kBiasGelu
                        ? (ltGelu ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS)
                        : CUBLASLT_EPILOGUE_DGELU;
    spec.bias = bias;
    spec.aux = aux;
    // A = w, B = x (dy): see the file's comment.
    DTC_ASSIGN_OR_RETURN(std::shared_ptr<const LtGemm> plan,
                         planLtGemm(dev, spec, w, a, ownGelu ? pre : y, where));
    if (plan) {
      cudaStream_t stream = dev.stream();
      const int64_t count = s.rows * s.n;
      float* preF32 = static_cast<float*>(pre);
      return BoundStep([plan, stream, where, ownGelu, preF32, y, yType, count]() -> Status {
        DTC_RETURN_IF_ERROR(plan->run(stream, where));
        if (!ownGelu) return Status::Ok();
        return launched(kernels::geluTanh(preF32, y, yType, count, stream), where);
      });
    }
  }

  // Unfused: the GEMM writes its f32 sum where the epilogue pass reads it, which then finishes:
  // pre for linear_bias_gelu; for linear_bias, y itself when f32 (in place), else an f32 buffer
  // in the step's scratch (the plan's; unplanned, shared slot 0, free for the step's own use as
  // the widened copies use it; reserved now, as a captured graph cannot allocate), then rounded
  // into y; for the gradient dx itself when f32, else such a buffer too.
  float* sum = nullptr;
  const bool narrowPre = preType != kernels::Float::kF32;
  if (Kind == LinearEpilogue::kBiasGelu && !narrowPre) {
    sum = static_cast<float*>(pre);
  } else if (Kind == LinearEpilogue::kBiasGelu ? narrowPre : narrowY) {
    DTC_ASSIGN_OR_RETURN(
        uint8_t * buffer,
        stepScratch(ctx, dev, static_cast<uint64_t>(s.rows * s.n) * sizeof(float), 0));
    sum = reinterpret_cast<float*>(buffer);
  } else {
    sum = static_cast<float*>(y);
  }
  cublasHandle_t handle = dev.blas();
  cudaStream_t stream = dev.stream();
  const int64_t rows = s.rows, n = s.n;
  return BoundStep([=]() -> Status {
    DTC_RETURN_IF_ERROR(gemm(handle, tf32, a, w, sum, gemmShape, where));
    switch (Kind) {
      case LinearEpilogue::kBias:
        return launched(kernels::biasAdd(sum, bias, y, yType, rows, n, stream), where);
      case LinearEpilogue::kBiasGelu:
        return launched(kernels::biasGelu(sum, bias, pre, preType, y, yType, rows, n, stream),
                        where);
      case LinearEpilogue::kGradInputGelu:
        return launched(kernels::geluGrad(sum, pre, preType, y, yType, rows * n, stream), where);
    }
    return Status::Ok();
  });
}

// dweight [N, K] = Σ dyᵀ·x and dbias [N] = Σ dy over the rows. In cuBLAS's terms dweight is D
// (K×N, ld K) = A · op(B) with A = x stored K×rows (ld K) and B = dy stored N×rows (ld N),
// transposed: BGRADB sums op(B) over k, the rows, one per column of D, an output feature.
StatusOr<BoundStep> bindLinearGradWeightBias(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(sharedLowPrecision(ctx).status());
  StepContext wide{ctx.step, ctx.inputs, ctx.outputs, ctx.pool, ctx.mesh};
  for (auto* list : {&wide.inputs, &wide.outputs})
    for (TensorView& t : *list)
      if (lowPrecision(t.dtype)) t.dtype = DType::kF32;
  DTC_ASSIGN_OR_RETURN(const LinearEpilogueShape s, checkLinearGradWeightBias(wide));
  const TensorView &dy = ctx.inputs[0], &x = ctx.inputs[1];
  const TensorView &dw = ctx.outputs[0], &db = ctx.outputs[1];
  if (dy.dtype != x.dtype)
    return invalid(ctx, "operands must share one element type, got " + dtypeName(dy.dtype) +
                            " and " + dtypeName(x.dtype));
  if (db.dtype != DType::kF32)
    return invalid(ctx, "dbias must be float32, got " + dtypeName(db.dtype));
  if (dw.dtype != DType::kF32 && dw.dtype != dy.dtype)
    return invalid(
        ctx, "dweight must be float32 or " + dtypeName(dy.dtype) + ", got " + dtypeName(dw.dtype));
  cudaDataType_t type = CUDA_R_32F;
  if (!gemmType(dy.dtype, type))
    return invalid(ctx, "no CUDA GEMM for " + dtypeName(dy.dtype) + " operands");
  const std::string where = ctx.where();
  // The weight gradient as linear_grad_weight's GEMM: [N, K] = dy [rows, N]ᵀ · x [rows, K].
  GemmShape gemmShape{s.n, s.k, s.rows, true, false, 1};
  gemmShape.type = type;
  gemmShape.f32Output = dw.dtype == DType::kF32;
  DTC_RETURN_IF_ERROR(checkGemm(gemmShape, where));
  const bool tf32 = dev.tf32();
  if (ltEpiloguesEnabled() && s.rows > 0 && s.n > 0 && s.k > 0 && dw.dtype == DType::kF32 &&
      aligned16(db.data)) {
    LtGemmSpec spec;
    spec.m = s.k, spec.n = s.n, spec.k = s.rows;
    spec.transB = true;
    spec.abType = type;
    spec.dType = CUDA_R_32F;
    spec.tf32 = tf32;
    spec.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    spec.biasGrad = db.f32();
    DTC_ASSIGN_OR_RETURN(std::shared_ptr<const LtGemm> plan,
                         planLtGemm(dev, spec, x.data, dy.data, dw.data, where));
    if (plan) {
      cudaStream_t stream = dev.stream();
      return BoundStep([plan, stream, where] { return plan->run(stream, where); });
    }
  }
  // Unfused: the GEMM, then the column sums of dy in a pass of their own.
  DTC_ASSIGN_OR_RETURN(uint8_t * partial,
                       stepScratch(ctx, dev, kernels::columnSumScratchBytes(s.rows, s.n)));
  const kernels::Float dyType = floatOf(type);
  cublasHandle_t handle = dev.blas();
  cudaStream_t stream = dev.stream();
  const void *pdy = dy.data, *px = x.data;
  void* pdw = dw.data;
  float* pdb = db.f32();
  const int64_t rows = s.rows, n = s.n;
  return BoundStep([=]() -> Status {
    DTC_RETURN_IF_ERROR(gemm(handle, tf32, pdy, px, pdw, gemmShape, where));
    return launched(kernels::columnSums(pdy, dyType, rows, n, partial, pdb, stream), where);
  });
}

}  // namespace

DTC_CUDA_BINDER(linear_grad_weight_bias, bindLinearGradWeightBias)
DTC_CUDA_BINDER(linear_bias, bindLinearEpilogue<LinearEpilogue::kBias>)
DTC_CUDA_BINDER(linear_bias_gelu, bindLinearEpilogue<LinearEpilogue::kBiasGelu>)
DTC_CUDA_BINDER(linear_grad_input_gelu, bindLinearEpilogue<LinearEpilogue::kGradInputGelu>)

}  // namespace dtc::cuda
