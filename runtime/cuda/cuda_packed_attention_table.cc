// causal_attention_qkv and its gradient on CUDA: attention on the fused projection qkv
// [B, T, 3·H·D] or on three, q [B, T, H·D], k and v [B, T, Hk·D] (ops/packed_attention.h), on
// one of two paths settled at bind time:
//
// cuDNN's fused flash attention (cudnn_attention.h), for bf16/f16 operands where libcudnn loads
// and has an engine for the step: q, k and v read in place, dq, dk and dv written in place, its
// workspace in the step's scratch. Its backward is not bitwise deterministic unless
// DTC_CUDNN_DETERMINISTIC=1.
//
// dtc's own kernels otherwise (f32 operands, no cuDNN, DTC_CUDA_ATTENTION=flash|gemm): the heads
// are unpacked into [B, H, T, D] blocks of the step's scratch with one transpose each way, the
// causal_attention(_grad) binder runs there (the GEMM path or the flash kernels,
// cuda_attention_table.cc), and the result is packed back: the unpacked kernels' arithmetic, bit
// for bit, with the operands' element type throughout.
//
// Which of the two, and what is said about it: cudnn_attention_path.h.
#include <array>
#include <string>
#include <vector>

#include "cuda_bind.h"
#include "cudnn_attention_path.h"
#include "exec/precision_contracts.h"
#include "exec/transformer_contracts.h"

namespace dtc::cuda {
namespace {

// The step on cuDNN, or null where it runs on dtc's kernels.
StatusOr<std::shared_ptr<const CudnnSdpa>> cudnnPath(const StepContext& ctx, Device& dev,
                                                     DType type, const PackedAttentionDims& a,
                                                     bool three, bool grad) {
  SdpaSpec spec;
  spec.batch = a.batch, spec.t = a.t, spec.heads = a.heads, spec.kvHeads = a.kvHeads, spec.d = a.d;
  spec.layout = three ? sequenceMajorSdpaLayout(a.t, a.heads, a.kvHeads, a.d)
                      : packedSdpaLayout(a.t, a.heads, a.d);
  return cudnnAttentionPath(ctx, dev, type, spec, grad, "");
}

// q, k and v (or their gradients) from `first` in `list`: three projections, or the fused one
// (C elements apart in each row).
std::array<uint8_t*, 3> parts(const std::vector<TensorView>& list, size_t first, bool three,
                              const PackedAttentionDims& a, DType type) {
  if (three) return {list[first].data, list[first + 1].data, list[first + 2].data};
  uint8_t* base = list[first].data;
  const uint64_t c = static_cast<uint64_t>(a.heads * a.d) * dtypeSize(type);
  return {base, base + c, base + 2 * c};
}

// The operands' element type: all float32 (the CPU's contract, its messages), or one 16-bit type
// for every operand but lse (float32).
StatusOr<DType> packedType(const StepContext& ctx, size_t inputs, size_t outputs,
                           const TensorView& lse) {
  DTC_ASSIGN_OR_RETURN(const DType low, sharedLowPrecision(ctx));
  if (low == DType::kF32) {
    DTC_RETURN_IF_ERROR(expect(ctx, inputs, outputs));
    return low;
  }
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (&t != &lse && t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) +
                                " and " + dtypeName(t.dtype));
  if (lse.dtype != DType::kF32)
    return invalid(ctx, "lse must be float32 beside " + dtypeName(low) + " operands, got " +
                            dtypeName(lse.dtype));
  return low;
}

TensorView blockView(uint8_t* at, DType type, const PackedAttentionDims& a, int64_t heads) {
  return TensorView{at, type, {a.batch, heads, a.t, a.d}};
}

// [B, T, parts, H, D] -> [parts, B, H, T, D]: the heads of packed rows, unpacked.
cudaError_t unpack(const void* packed, int64_t parts, const PackedAttentionDims& a, void* blocks,
                   int elementBytes, cudaStream_t stream) {
  return kernels::transpose(packed, {a.batch, a.t, parts, a.heads, a.d}, {2, 0, 3, 1, 4}, blocks,
                            elementBytes, stream);
}

// [parts, B, H, T, D] -> [B, T, parts, H, D]: the heads packed into rows again.
cudaError_t pack(const void* blocks, int64_t parts, const PackedAttentionDims& a, void* packed,
                 int elementBytes, cudaStream_t stream) {
  return kernels::transpose(blocks, {parts, a.batch, a.heads, a.t, a.d}, {1, 3, 0, 2, 4}, packed,
                            elementBytes, stream);
}

// q, k and v into their blocks at `region` (s.k and s.v within it): the fused projection's in
// one transpose, three projections' in one each.
cudaError_t unpackQkv(const std::array<uint8_t*, 3>& from, bool three, const PackedAttentionDims& a,
                      const PackedAttentionScratch& s, uint8_t* region, int size,
                      cudaStream_t stream) {
  if (!three) return unpack(from[0], 3, a, region, size, stream);
  const uint64_t at[3] = {0, s.k, s.v};
  for (int p = 0; p < 3; ++p) {
    const int64_t heads = p == 0 ? a.heads : a.kvHeads;
    const cudaError_t e = kernels::transpose(from[p], {a.batch, a.t, heads, a.d}, {0, 2, 1, 3},
                                             region + at[p], size, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// The inverse: dq, dk and dv from their blocks into the projections' rows.
cudaError_t packQkv(const uint8_t* region, const PackedAttentionDims& a,
                    const PackedAttentionScratch& s, bool three, const std::array<uint8_t*, 3>& to,
                    int size, cudaStream_t stream) {
  if (!three) return pack(region, 3, a, to[0], size, stream);
  const uint64_t at[3] = {0, s.k, s.v};
  for (int p = 0; p < 3; ++p) {
    const int64_t heads = p == 0 ? a.heads : a.kvHeads;
    const cudaError_t e = kernels::transpose(region + at[p], {a.batch, heads, a.t, a.d},
                                             {0, 2, 1, 3}, to[p], size, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// The step's scratch: its planned scratch when that holds `bytes`, else memory of its own
// (reported as beyond the plan).
StatusOr<std::pair<uint8_t*, uint64_t>> packedScratch(const StepContext& ctx, Device& dev,
                                                      uint64_t bytes) {
  if (ctx.scratch && ctx.scratchBytes >= bytes)
    return std::make_pair(ctx.scratch, ctx.scratchBytes);
  DTC_ASSIGN_OR_RETURN(uint8_t * own, stepScratch(ctx, dev, bytes));
  return std::make_pair(own, bytes);
}

StatusOr<BoundStep> bindCausalAttentionQkv(const StepContext& ctx, Device& dev) {
  const bool three = ctx.inputs.size() == 3;
  const size_t inputs = three ? 3 : 1;
  if (ctx.outputs.size() != 2 || (ctx.inputs.size() != 1 && !three))
    return invalid(ctx, "expects 1 or 3 inputs and 2 outputs");
  DTC_ASSIGN_OR_RETURN(const DType type, packedType(ctx, inputs, 2, ctx.outputs[1]));
  StepContext f32 = ctx;
  for (TensorView& t : f32.inputs) t.dtype = DType::kF32;
  f32.outputs[0].dtype = DType::kF32;
  DTC_ASSIGN_OR_RETURN(const PackedAttentionDims a, checkCausalAttentionQkv(f32));
  DTC_ASSIGN_OR_RETURN(std::shared_ptr<const CudnnSdpa> sdpa,
                       cudnnPath(ctx, dev, type, a, three, false));
  const std::array<uint8_t*, 3> qkv = parts(ctx.inputs, 0, three, a, type);
  void* out = ctx.outputs[0].data;
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  if (sdpa) {
    DTC_ASSIGN_OR_RETURN(uint8_t * ws, cudnnWorkspace(ctx, dev, *sdpa));
    float* lse = ctx.outputs[1].f32();
    return BoundStep(
        [=] { return sdpa->forward(stream, qkv[0], qkv[1], qkv[2], out, lse, ws, where); });
  }
  const int size = static_cast<int>(dtypeSize(type));
  const PackedAttentionScratch s = packedAttentionScratch(a, size, false);
  const uint64_t innerBytes =
      kernels::attentionScratchBytes(a.batch * a.heads, a.t, type != DType::kF32, false);
  DTC_ASSIGN_OR_RETURN(auto scratch, packedScratch(ctx, dev, s.inner + innerBytes));
  uint8_t* base = scratch.first;
  StepContext unpacked{
      ctx.step,
      {blockView(base + s.qkv, type, a, a.heads), blockView(base + s.qkv + s.k, type, a, a.kvHeads),
       blockView(base + s.qkv + s.v, type, a, a.kvHeads)},
      {blockView(base + s.out, type, a, a.heads), ctx.outputs[1]},
      ctx.pool,
      ctx.mesh};
  unpacked.scratch = base + s.inner;
  unpacked.scratchBytes = scratch.second - s.inner;
  unpacked.unplannedBytes = ctx.unplannedBytes;
  DTC_ASSIGN_OR_RETURN(BoundStep attention, bindCuda_causal_attention(unpacked, dev));
  return BoundStep([=]() -> Status {
    DTC_RETURN_IF_ERROR(launched(unpackQkv(qkv, three, a, s, base + s.qkv, size, stream), where));
    DTC_RETURN_IF_ERROR(attention());
    return launched(pack(base + s.out, 1, a, out, size, stream), where);
  });
}

StatusOr<BoundStep> bindCausalAttentionQkvGrad(const StepContext& ctx, Device& dev) {
  const bool three = ctx.inputs.size() == 6;
  if ((ctx.inputs.size() != 4 && !three) || ctx.outputs.size() != (three ? 3u : 1u))
    return invalid(ctx, "expects 4 inputs and 1 output, or 6 inputs and 3 outputs");
  const size_t n = ctx.inputs.size();
  DTC_ASSIGN_OR_RETURN(const DType type, packedType(ctx, n, three ? 3 : 1, ctx.inputs[n - 1]));
  StepContext f32 = ctx;
  for (size_t i = 0; i + 1 < n; ++i) f32.inputs[i].dtype = DType::kF32;
  for (TensorView& t : f32.outputs) t.dtype = DType::kF32;
  DTC_ASSIGN_OR_RETURN(const PackedAttentionDims a, checkCausalAttentionQkvGrad(f32));
  DTC_ASSIGN_OR_RETURN(std::shared_ptr<const CudnnSdpa> sdpa,
                       cudnnPath(ctx, dev, type, a, three, true));
  const void *dout = ctx.inputs[0].data, *out = ctx.inputs[n - 2].data;
  const std::array<uint8_t*, 3> qkv = parts(ctx.inputs, 1, three, a, type);
  const std::array<uint8_t*, 3> d = parts(ctx.outputs, 0, three, a, type);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  if (sdpa) {
    DTC_ASSIGN_OR_RETURN(uint8_t * ws, cudnnWorkspace(ctx, dev, *sdpa));
    const float* lse = ctx.inputs[n - 1].f32();
    return BoundStep([=] {
      return sdpa->backward(stream, dout, qkv[0], qkv[1], qkv[2], out, lse, d[0], d[1], d[2], ws,
                            where);
    });
  }
  const int size = static_cast<int>(dtypeSize(type));
  const PackedAttentionScratch s = packedAttentionScratch(a, size, true);
  const uint64_t innerBytes =
      kernels::attentionScratchBytes(a.batch * a.heads, a.t, type != DType::kF32, true);
  DTC_ASSIGN_OR_RETURN(auto scratch, packedScratch(ctx, dev, s.inner + innerBytes));
  uint8_t* base = scratch.first;
  StepContext unpacked{
      ctx.step,
      {blockView(base + s.dout, type, a, a.heads), blockView(base + s.qkv, type, a, a.heads),
       blockView(base + s.qkv + s.k, type, a, a.kvHeads),
       blockView(base + s.qkv + s.v, type, a, a.kvHeads), blockView(base + s.out, type, a, a.heads),
       ctx.inputs[n - 1]},
      {blockView(base + s.dqkv, type, a, a.heads),
       blockView(base + s.dqkv + s.k, type, a, a.kvHeads),
       blockView(base + s.dqkv + s.v, type, a, a.kvHeads)},
      ctx.pool,
      ctx.mesh};
  unpacked.scratch = base + s.inner;
  unpacked.scratchBytes = scratch.second - s.inner;
  unpacked.unplannedBytes = ctx.unplannedBytes;
  DTC_ASSIGN_OR_RETURN(BoundStep attention, bindCuda_causal_attention_grad(unpacked, dev));
  return BoundStep([=]() -> Status {
    DTC_RETURN_IF_ERROR(launched(unpackQkv(qkv, three, a, s, base + s.qkv, size, stream), where));
    DTC_RETURN_IF_ERROR(launched(unpack(out, 1, a, base + s.out, size, stream), where));
    DTC_RETURN_IF_ERROR(launched(unpack(dout, 1, a, base + s.dout, size, stream), where));
    DTC_RETURN_IF_ERROR(attention());
    return launched(packQkv(base + s.dqkv, a, s, three, d, size, stream), where);
  });
}

}  // namespace

DTC_CUDA_BINDER(causal_attention_qkv, bindCausalAttentionQkv)
DTC_CUDA_BINDER(causal_attention_qkv_grad, bindCausalAttentionQkvGrad)

}  // namespace dtc::cuda
