// causal_attention and causal_attention_grad on CUDA (exec/cpu_transformer_table.cc's): the
// flash-attention kernels (kernels/flash_attention.cu) behind the CPU's contracts and messages.
// What the CPU takes and the kernels do not (a head dimension above 128; 16-bit operands beside
// float32 ones other than lse, or a 16-bit lse) is a bind error.
#include "cuda_attention_table.h"

#include <array>
#include <string>
#include <vector>

#include "cuda_bind.h"
#include "kernels/flash_attention.h"

namespace dtc::cuda {
namespace {

// q, k, v (and dout, out) [..., T, D] with lse [..., T]: (slices, T, D), or zeros if q is not.
// The CPU binders' reading of the shapes.
std::array<int64_t, 3> attentionDims(const TensorView& q) {
  if (q.shape.size() < 2) return {0, 0, 0};
  int64_t t = q.shape[q.shape.size() - 2], d = q.shape.back();
  if (t == 0 || d == 0) return {0, 0, 0};
  return {q.numElements() / (t * d), t, d};
}

using kernels::Float;

// The kernels' element type. All float32: the CPU's contract (expect(), its messages). Otherwise
// mixed precision: every operand but lse (input or output `lse`, by position) of one 16-bit type,
// lse float32. The 16-bit types are compared first, in the CPU's order and words (its
// bindLowPrecision), so a step both backends refuse reads the same on both.
StatusOr<Float> attentionType(const StepContext& ctx, size_t inputs, size_t outputs, bool lseIsInput,
                              size_t lseIndex) {
  DType low = DType::kF32;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list) {
      if (t.dtype != DType::kBF16 && t.dtype != DType::kF16) continue;
      if (low != DType::kF32 && t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) + " and " +
                                dtypeName(t.dtype));
      low = t.dtype;
    }
  if (low == DType::kF32) {
    DTC_RETURN_IF_ERROR(expect(ctx, inputs, outputs));
    return Float::kF32;
  }
  if (ctx.inputs.size() != inputs || ctx.outputs.size() != outputs)
    return invalid(ctx, "expects " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) + " outputs");
  const TensorView& lse = lseIsInput ? ctx.inputs[lseIndex] : ctx.outputs[lseIndex];
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (&t != &lse && t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) + " and " +
                                dtypeName(t.dtype));
  if (lse.dtype != DType::kF32)
    return invalid(ctx, "lse must be float32 beside " + dtypeName(low) + " operands, got " + dtypeName(lse.dtype));
  return low == DType::kBF16 ? Float::kBF16 : Float::kF16;
}

// The kernels' own limits, checked after the CPU's contract so a malformed step reads the same
// on both backends: D up to kFlashMaxHeadDim, and tiles that fit the device's shared memory.
Status checkKernelLimits(const StepContext& ctx, const Device& dev, int64_t d) {
  if (d > kernels::kFlashMaxHeadDim)
    return invalid(ctx, "head dimension " + std::to_string(d) + " is above the CUDA flash-attention kernels' limit of " +
                            std::to_string(kernels::kFlashMaxHeadDim) + " (the CPU backend takes any)");
  int optIn = 0;
  DTC_RETURN_IF_ERROR(cudaStatus(cudaDeviceGetAttribute(&optIn, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.ordinal()),
                                 ctx.where() + "querying the shared memory per block"));
  const uint64_t need = kernels::flashAttentionSharedBytes(d);
  if (need > static_cast<uint64_t>(optIn))
    return invalid(ctx, "the flash-attention kernels need " + std::to_string(need) +
                            " bytes of shared memory per block for head dimension " + std::to_string(d) + "; " +
                            dev.description() + " allows " + std::to_string(optIn));
  return Status::Ok();
}

StatusOr<BoundStep> bindCausalAttention(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const Float type, attentionType(ctx, 3, 2, false, 1));
  TensorView q = ctx.inputs[0], k = ctx.inputs[1], v = ctx.inputs[2], out = ctx.outputs[0],
             lse = ctx.outputs[1];
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, k));
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, v));
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, out));
  // Plain copies: C++17 lambdas cannot capture structured bindings.
  const std::array<int64_t, 3> dims = attentionDims(q);
  const int64_t slices = dims[0], t = dims[1], d = dims[2];
  if (slices == 0 || lse.numElements() != slices * t)
    return invalid(ctx, "needs q, k, v, out [..., T, D] and lse [..., T], got " + str(q.shape) +
                            " and " + str(lse.shape));
  DTC_RETURN_IF_ERROR(checkKernelLimits(ctx, dev, d));
  const float scale = static_cast<float>(ctx.floatAttr("scale"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::causalAttention(type, q.data, k.data, v.data, out.data, lse.f32(), slices, t, d, scale,
                                             stream),
                    where);
  });
}

StatusOr<BoundStep> bindCausalAttentionGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const Float type, attentionType(ctx, 6, 3, true, 5));
  const TensorView& q = ctx.inputs[1];
  for (size_t i : {0u, 2u, 3u, 4u}) DTC_RETURN_IF_ERROR(sameShape(ctx, q, ctx.inputs[i]));
  for (const TensorView& g : ctx.outputs) DTC_RETURN_IF_ERROR(sameShape(ctx, q, g));
  const std::array<int64_t, 3> dims = attentionDims(q);
  const int64_t slices = dims[0], t = dims[1], d = dims[2];
  if (slices == 0 || ctx.inputs[5].numElements() != slices * t)
    return invalid(ctx, "needs [..., T, D] operands and lse [..., T], got " + str(q.shape) + " and " +
                            str(ctx.inputs[5].shape));
  DTC_RETURN_IF_ERROR(checkKernelLimits(ctx, dev, d));
  // D_i = dout_i · out_i per row, written by the kernels' pre-pass (the step's own, for its life).
  DTC_ASSIGN_OR_RETURN(void* scratch, dev.scratch(kernels::causalAttentionGradScratchBytes(slices, t)));
  const std::vector<TensorView> in = ctx.inputs, out = ctx.outputs;
  const float scale = static_cast<float>(ctx.floatAttr("scale"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::causalAttentionGrad(type, in[0].data, in[1].data, in[2].data, in[3].data, in[4].data,
                                                 in[5].f32(), out[0].data, out[1].data, out[2].data, slices, t, d,
                                                 scale, scratch, stream),
                    where);
  });
}

}  // namespace

const CudaBinderTable& attentionCudaBinders() {
  static const CudaBinderTable table = {
      {"causal_attention", bindCausalAttention},
      {"causal_attention_grad", bindCausalAttentionGrad},
  };
  return table;
}

}  // namespace dtc::cuda
