// causal_attention, causal_attention_grad and attention_merge on CUDA
// (cpu/cpu_attention_table.cc's), behind the CPU's contracts and messages, attention on one of
// three paths decided at bind time:
//
// cuDNN's fused flash attention (cudnn_attention_path.h) for 16-bit operands over whole
// sequences where libcudnn loads and offers an engine: q, k, v read as [B, H, T, D] blocks (k
// and v with their own heads under grouped-query attention), the gradients written in place,
// its workspace in the step's scratch.
//
// The flash-attention kernels (kernels/flash_attention.cu): f32 CUDA cores, no [T, T] buffer.
// Every float32 step (their parity bound is 1e-5, which tensor-core products would not keep).
// What the CPU takes and they do not (a head dimension above 128) is a bind error.
//
// The GEMM path, for bf16 / f16 operands: cuBLAS strided-batched GEMMs (batch = key/value slices)
// on the tensor cores with f32 accumulation, and one row pass between them
// (kernels/attention_gemm.cu). The [T, T] scores live only in scratch during the step; the op still
// keeps only out and lse.
//   forward:  S = q·kᵀ (f32) → row pass: lse, P = exp(scale·S − lse) in T → out = P·v
//   backward: S = q·kᵀ, dP = dout·vᵀ (f32) → row pass: P in T, D_i = dout_i·out_i, dS =
//             P ⊙ (dP − D_i)·scale in T → dV = Pᵀ·dout, dQ = dS·k, dK = dSᵀ·q
// FlashAttention-2's roundings: P and dS are rounded to T as the operands of the next products;
// the dS pass recomputes P in f32 from S and lse (the forward's expression, so the same value)
// and takes dS from that unrounded P, as the CPU formula does, rather than from the rounded copy
// the dV product reads. cuBLAS rounds each 16-bit output (out, dq, dk, dv) once from its f32
// accumulator (split-K reductions stay f32, cuda_device.cc). The GEMMs compute the whole T×T,
// the upper triangle included: wasted work (about half of the score products), made harmless by
// exact zeros in P and dS there; one consequence is that a non-finite v, dout, k or q value at a
// key a query cannot see still reaches that query (0·inf), where the CPU never reads it.
//
// Blocks of the sequence (context parallelism: `seq_axes`, `seq_chunks`, `kv_shift`; the shared
// contract attentionBlocks places them) always take the flash kernels, whose masks know the
// positions; the GEMM path's row pass is causal on a whole sequence.
//
// DTC_CUDA_ATTENTION=flash forces the flash kernels for 16-bit operands too, =gemm the GEMM path
// whatever its scratch (16-bit operands only), =cudnn cuDNN or a bind error; unset or auto:
// cuDNN where it takes the step, else the GEMM path when its scratch fits kGemmScratchBudget and
// cuBLAS's 32-bit sizes hold the shapes, else the flash kernels.

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_bind.h"
#include "cudnn_attention_path.h"
#include "exec/transformer_contracts.h"
#include "gemm.h"
#include "kernels/flash_attention.h"
#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

using kernels::Float;

// The kernels' element type. All float32: the CPU's contract (expect(), its messages). Otherwise
// mixed precision: every operand but lse (input or output `lse`, by position) of one 16-bit type,
// lse float32. The 16-bit types are compared first, in the CPU's order and words (its
// bindLowPrecision), so a step both backends refuse reads the same on both.
StatusOr<Float> attentionType(const StepContext& ctx, size_t inputs, size_t outputs,
                              bool lseIsInput, size_t lseIndex) {
  DType low = DType::kF32;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list) {
      if (t.dtype != DType::kBF16 && t.dtype != DType::kF16) continue;
      if (low != DType::kF32 && t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) +
                                " and " + dtypeName(t.dtype));
      low = t.dtype;
    }
  if (low == DType::kF32) {
    DTC_RETURN_IF_ERROR(expect(ctx, inputs, outputs));
    return Float::kF32;
  }
  if (ctx.inputs.size() != inputs || ctx.outputs.size() != outputs)
    return invalid(ctx, "expects " + std::to_string(inputs) + " inputs and " +
                            std::to_string(outputs) + " outputs");
  const TensorView& lse = lseIsInput ? ctx.inputs[lseIndex] : ctx.outputs[lseIndex];
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (&t != &lse && t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) +
                                " and " + dtypeName(t.dtype));
  if (lse.dtype != DType::kF32)
    return invalid(ctx, "lse must be float32 beside " + dtypeName(low) + " operands, got " +
                            dtypeName(lse.dtype));
  return floatOf(low);
}

// The kernels' own limits, checked after the CPU's contract so a malformed step reads the same
// on both backends: D up to kFlashMaxHeadDim, and tiles that fit the device's shared memory.
Status checkKernelLimits(const StepContext& ctx, const Device& dev, int64_t d) {
  if (d > kernels::kFlashMaxHeadDim)
    return invalid(ctx, "head dimension " + std::to_string(d) +
                            " is above the CUDA flash-attention kernels' limit of " +
                            std::to_string(kernels::kFlashMaxHeadDim) +
                            " (the CPU backend takes any)");
  int optIn = 0;
  DTC_RETURN_IF_ERROR(cudaStatus(
      cudaDeviceGetAttribute(&optIn, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.ordinal()),
      ctx.where() + "querying the shared memory per block"));
  const uint64_t need = kernels::flashAttentionSharedBytes(d);
  if (need > static_cast<uint64_t>(optIn))
    return invalid(ctx, "the flash-attention kernels need " + std::to_string(need) +
                            " bytes of shared memory per block for head dimension " +
                            std::to_string(d) + "; " + dev.description() + " allows " +
                            std::to_string(optIn));
  return Status::Ok();
}

// ---- the GEMM path ----------------------------------------------------------------------------

// Device::sharedScratch's slot for the [T, T] buffers where the plan gave a step no scratch:
// every attention step on the compute stream shares one buffer (the steps run one at a time), so
// the 12 layers of a GPT-2 forward and backward hold one backward's worth, not 24. Planned steps
// have their buffers in their own scratch (kernels::attentionScratchBytes), which the arena
// reuses the same way.
constexpr int kScoresSlot = 3;
static_assert(kScoresSlot < Device::kSharedSlots && kScoresSlot != Device::kCommPackingSlot,
              "the scores slot is the compute stream's own");
using kernels::kGemmScratchBudget;
using kernels::scoreElements;
using kernels::ScoresLayout;
using kernels::scoresLayout;

enum class Path { kAuto, kFlash, kGemm };

StatusOr<Path> requestedPath(const StepContext& ctx) {
  if (!runtimeOptionsStatus().ok()) return invalid(ctx, runtimeOptionsStatus().status().message());
  switch (runtimeOptions().cudaAttention) {
    case RuntimeOptions::Attention::kFlash: return Path::kFlash;
    case RuntimeOptions::Attention::kGemm: return Path::kGemm;
    default: return Path::kAuto;
  }
}

// The three GEMM forms, per key/value slice (row-major; gemm.h's C [M, N] = op(A) [M, K] ·
// op(B) [K, N]), batched over the key/value slices. Grouped-query attention's `group` query
// slices of one key/value slice lie next to each other, so they stack into G = group·T rows:
// q, dout, out, dq [G, D], the scores [G, T], k, v, dk, dv [T, D].
//   scores:     C [G, T] f32 = A [G, D] · B [T, D]ᵀ   (S = q·kᵀ, dP = dout·vᵀ)
//   rowsTimes:  C [G, D]     = A [G, T] · B [T, D]    (out = P·v, dQ = dS·k)
//   transposed: C [T, D]     = A [G, T]ᵀ · B [G, D]   (dV = Pᵀ·dout, dK = dSᵀ·q: the sums over
//                                                      the group in the product)
struct AttentionGemms {
  GemmShape scores, rowsTimes, transposed;
};

AttentionGemms attentionGemms(int64_t slices, int64_t t, int64_t d, int64_t group,
                              cudaDataType_t type) {
  auto shape = [&](int64_t m, int64_t n, int64_t k, bool transA, bool transB, int64_t strideA,
                   int64_t strideB, int64_t strideC, bool f32Output) {
    GemmShape s;
    s.m = m, s.n = n, s.k = k;
    s.transA = transA, s.transB = transB;
    s.batch = slices / group;
    s.strideA = strideA, s.strideB = strideB, s.strideC = strideC;
    s.type = type;
    s.f32Output = f32Output;
    return s;
  };
  const int64_t rows = group * t;
  return {shape(rows, t, d, false, true, rows * d, t * d, rows * t, true),
          shape(rows, d, t, false, false, rows * t, t * d, rows * d, false),
          shape(t, d, rows, true, false, rows * t, rows * d, t * d, false)};
}

cudaDataType_t cudaType(Float type) { return type == Float::kBF16 ? CUDA_R_16BF : CUDA_R_16F; }

// Whether the step takes the GEMM path (see the file's comment): 16-bit operands, cuBLAS's sizes,
// and `bytes` of scratch within the budget unless forced. Forced onto a shape cuBLAS cannot take,
// the GEMMs' error. Blocks of the sequence (context parallelism: `tk` keys placed by `at`) take
// the flash kernels, whose masks know the positions; the GEMM path's row pass is causal on a
// whole sequence.
StatusOr<bool> takesGemmPath(const StepContext& ctx, Float type, const AttentionGemms& g,
                             uint64_t bytes, const AttentionPositions& at, int64_t tk) {
  DTC_ASSIGN_OR_RETURN(const Path path, requestedPath(ctx));
  const bool blocks = !at.plain() || tk != g.scores.n;
  if (blocks && path == Path::kGemm)
    return invalid(ctx,
                   "DTC_CUDA_ATTENTION=gemm cannot take a block of the sequence (context "
                   "parallelism): its row pass is causal on a whole sequence");
  if (type == Float::kF32 || path == Path::kFlash || blocks) return false;
  for (const GemmShape* s : {&g.scores, &g.rowsTimes, &g.transposed}) {
    Status fits = checkGemm(*s, ctx.where());
    if (!fits.ok()) {
      if (path == Path::kGemm) return fits;
      return false;
    }
  }
  return path == Path::kGemm || bytes <= kGemmScratchBudget;
}

// ---- cuDNN -------------------------------------------------------------------------------------

// The step on cuDNN's fused attention (cudnn_attention_path.h), or null: q [..., H, T, D] as
// [B, H, T, D] blocks, k and v of H / group heads. Blocks of the sequence stay on dtc's kernels,
// whose masks know the positions.
StatusOr<std::shared_ptr<const CudnnSdpa>> cudnnPath(const StepContext& ctx, Device& dev,
                                                     Float type, const TensorView& q,
                                                     const AttentionDims& a, bool grad) {
  const int64_t heads = q.shape.size() >= 3 ? q.shape[q.shape.size() - 3] : 1;
  SdpaSpec spec;
  spec.batch = a.slices / heads, spec.t = a.t, spec.heads = heads, spec.d = a.d;
  spec.kvHeads = heads / a.group;
  spec.layout = headMajorSdpaLayout(a.t, heads, spec.kvHeads, a.d);
  const bool blocks = !a.positions.plain() || a.tk != a.t;
  const DType dtype = type == Float::kF32    ? DType::kF32
                      : type == Float::kBF16 ? DType::kBF16
                                             : DType::kF16;
  return cudnnAttentionPath(ctx, dev, dtype, spec, grad,
                            blocks ? "a block of the sequence (context parallelism) takes dtc's "
                                     "kernels, whose masks know the positions"
                                   : "");
}

// ---- the binders -------------------------------------------------------------------------------

StatusOr<BoundStep> bindCausalAttention(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const Float type, attentionType(ctx, 3, 2, false, 1));
  TensorView q = ctx.inputs[0], k = ctx.inputs[1], v = ctx.inputs[2], out = ctx.outputs[0],
             lse = ctx.outputs[1];
  // The CPU's checks in the CPU's order (checkCausalAttention), so both refuse alike.
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, out));
  DTC_RETURN_IF_ERROR(sameShape(ctx, k, v));
  DTC_ASSIGN_OR_RETURN(const AttentionDims a, attentionBlocks(ctx, q, k, lse));
  const int64_t slices = a.slices, t = a.t, tk = a.tk, d = a.d;
  const AttentionPositions at = a.positions;
  const float scale = static_cast<float>(ctx.floatAttr("scale"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  DTC_ASSIGN_OR_RETURN(std::shared_ptr<const CudnnSdpa> sdpa,
                       cudnnPath(ctx, dev, type, q, a, false));
  if (sdpa) {
    DTC_ASSIGN_OR_RETURN(uint8_t * ws, cudnnWorkspace(ctx, dev, *sdpa));
    return BoundStep([=] {
      return sdpa->forward(stream, q.data, k.data, v.data, out.data, lse.f32(), ws, where);
    });
  }
  const AttentionGemms g =
      attentionGemms(slices, t, d, a.group, type == Float::kF32 ? CUDA_R_32F : cudaType(type));
  const ScoresLayout layout = scoresLayout(scoreElements(slices, t), false);
  DTC_ASSIGN_OR_RETURN(const bool gemmPath, takesGemmPath(ctx, type, g, layout.bytes, at, tk));
  if (!gemmPath) {
    DTC_RETURN_IF_ERROR(checkKernelLimits(ctx, dev, d));
    return BoundStep([=] {
      return launched(kernels::causalAttention(type, q.data, k.data, v.data, out.data, lse.f32(),
                                               slices, t, tk, d, scale, at, stream, a.group),
                      where);
    });
  }
  // Unplanned, the shared slot is reserved for the backward's layout when that fits the budget:
  // training binds forward steps first, and the slot would otherwise take a second, larger
  // buffer for the backward ones while the forward ones keep the first (Device::sharedScratch
  // never shrinks or frees).
  uint8_t* base = ctx.scratch;
  if (!base || ctx.scratchBytes < layout.bytes) {
    const uint64_t gradBytes = scoresLayout(scoreElements(slices, t), true).bytes;
    const uint64_t reserve =
        gradBytes <= kGemmScratchBudget ? std::max(layout.bytes, gradBytes) : layout.bytes;
    DTC_ASSIGN_OR_RETURN(base, stepScratch(ctx, dev, reserve, kScoresSlot));
  }
  float* scores = reinterpret_cast<float*>(base + layout.s);
  void* probs = base + layout.p;
  cublasHandle_t handle = dev.blas();
  return BoundStep([=]() -> Status {
    // 16-bit operands: tf32 concerns f32 GEMMs only.
    DTC_RETURN_IF_ERROR(gemm(handle, false, q.data, k.data, scores, g.scores, where));
    DTC_RETURN_IF_ERROR(launched(
        kernels::attentionSoftmaxRows(type, scores, lse.f32(), probs, slices, t, scale, stream),
        where));
    return gemm(handle, false, probs, v.data, out.data, g.rowsTimes, where);
  });
}

StatusOr<BoundStep> bindCausalAttentionGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const Float type, attentionType(ctx, 6, 3, true, 5));
  // The CPU's checks in the CPU's order (checkCausalAttentionGrad), so both refuse alike.
  const TensorView &q = ctx.inputs[1], &k = ctx.inputs[2];
  for (size_t i : {0u, 4u}) DTC_RETURN_IF_ERROR(sameShape(ctx, q, ctx.inputs[i]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, ctx.outputs[0]));
  for (const TensorView* other : {&ctx.inputs[3], &ctx.outputs[1], &ctx.outputs[2]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, k, *other));
  DTC_ASSIGN_OR_RETURN(const AttentionDims a, attentionBlocks(ctx, q, k, ctx.inputs[5]));
  const int64_t slices = a.slices, t = a.t, tk = a.tk, d = a.d, group = a.group;
  const AttentionPositions at = a.positions;
  const std::vector<TensorView> in = ctx.inputs, out = ctx.outputs;
  const float scale = static_cast<float>(ctx.floatAttr("scale"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  DTC_ASSIGN_OR_RETURN(std::shared_ptr<const CudnnSdpa> sdpa,
                       cudnnPath(ctx, dev, type, q, a, true));
  if (sdpa) {
    DTC_ASSIGN_OR_RETURN(uint8_t * ws, cudnnWorkspace(ctx, dev, *sdpa));
    return BoundStep([=] {
      return sdpa->backward(stream, in[0].data, in[1].data, in[2].data, in[3].data, in[4].data,
                            in[5].f32(), out[0].data, out[1].data, out[2].data, ws, where);
    });
  }
  const AttentionGemms g =
      attentionGemms(slices, t, d, a.group, type == Float::kF32 ? CUDA_R_32F : cudaType(type));
  const ScoresLayout layout = scoresLayout(scoreElements(slices, t), true);
  DTC_ASSIGN_OR_RETURN(const bool gemmPath, takesGemmPath(ctx, type, g, layout.bytes, at, tk));
  if (!gemmPath) {
    DTC_RETURN_IF_ERROR(checkKernelLimits(ctx, dev, d));
    // D_i = dout_i · out_i per row, written by the kernels' pre-pass (the step's own, for its
    // life).
    DTC_ASSIGN_OR_RETURN(
        void* scratch, stepScratch(ctx, dev, kernels::causalAttentionGradScratchBytes(slices, t)));
    return BoundStep([=] {
      return launched(kernels::causalAttentionGrad(type, in[0].data, in[1].data, in[2].data,
                                                   in[3].data, in[4].data, in[5].f32(), out[0].data,
                                                   out[1].data, out[2].data, slices, t, tk, d,
                                                   scale, at, scratch, stream, group),
                      where);
    });
  }
  DTC_ASSIGN_OR_RETURN(uint8_t * base, stepScratch(ctx, dev, layout.bytes, kScoresSlot));
  float* scores = reinterpret_cast<float*>(base + layout.s);
  float* dprobs = reinterpret_cast<float*>(base + layout.dp);  // dP, the loss's gradient in P
  void* probs = base + layout.p;
  void* dscores = base + layout.ds;  // dS, the gradient in S = q·kᵀ (scale included)
  cublasHandle_t handle = dev.blas();
  const void *dout = in[0].data, *qd = in[1].data, *kd = in[2].data, *vd = in[3].data,
             *od = in[4].data;
  const float* lse = in[5].f32();
  void *dq = out[0].data, *dk = out[1].data, *dv = out[2].data;
  return BoundStep([=]() -> Status {
    DTC_RETURN_IF_ERROR(gemm(handle, false, qd, kd, scores, g.scores, where));
    DTC_RETURN_IF_ERROR(gemm(handle, false, dout, vd, dprobs, g.scores, where));
    DTC_RETURN_IF_ERROR(
        launched(kernels::attentionGradRows(type, scores, dprobs, lse, dout, od, probs, dscores,
                                            slices, t, d, scale, stream),
                 where));
    DTC_RETURN_IF_ERROR(gemm(handle, false, probs, dout, dv, g.transposed, where));
    DTC_RETURN_IF_ERROR(gemm(handle, false, dscores, kd, dq, g.rowsTimes, where));
    return gemm(handle, false, dscores, qd, dk, g.transposed, where);
  });
}

// The outputs of one float type (f32, or the attention's 16-bit type), the log-sum-exps f32.
StatusOr<BoundStep> bindAttentionMerge(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 4 || ctx.outputs.size() != 2)
    return invalid(ctx, "expects 4 inputs and 2 outputs");
  const DType outType = ctx.outputs[0].dtype;
  for (const TensorView* t : {&ctx.inputs[0], &ctx.inputs[2]})
    if (t->dtype != outType)
      return invalid(ctx, "outputs must share one element type, got " + dtypeName(t->dtype) +
                              " and " + dtypeName(outType));
  for (const TensorView* t : {&ctx.inputs[1], &ctx.inputs[3], &ctx.outputs[1]})
    if (t->dtype != DType::kF32)
      return invalid(ctx, "log-sum-exps must be float32, got " + dtypeName(t->dtype));
  if (outType != DType::kF32 && outType != DType::kBF16 && outType != DType::kF16)
    return invalid(ctx, "outputs must be floats, got " + dtypeName(outType));
  const Float type = outType == DType::kF32    ? Float::kF32
                     : outType == DType::kBF16 ? Float::kBF16
                                               : Float::kF16;
  const TensorView &out = ctx.outputs[0], &lse = ctx.outputs[1];
  for (size_t i : {0u, 2u}) DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[i], out));
  for (size_t i : {1u, 3u}) DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[i], lse));
  if (out.shape.size() < 2 || out.shape.back() <= 0 ||
      lse.numElements() * out.shape.back() != out.numElements())
    return invalid(ctx, "needs out [..., T, D] and lse [..., T], got " + str(out.shape) + " and " +
                            str(lse.shape));
  const std::vector<TensorView> in = ctx.inputs;
  const int64_t rows = lse.numElements(), d = out.shape.back();
  void* o = out.data;
  float* l = lse.f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::attentionMerge(type, in[0].data, in[1].f32(), in[2].data, in[3].f32(),
                                            o, l, rows, d, stream),
                    where);
  });
}

}  // namespace

DTC_CUDA_BINDER(attention_merge, bindAttentionMerge)
DTC_CUDA_BINDER(causal_attention, bindCausalAttention)
DTC_CUDA_BINDER(causal_attention_grad, bindCausalAttentionGrad)

}  // namespace dtc::cuda
