// causal_attention, causal_attention_grad and attention_merge on the CPU: flash-style over q, k, v
// [B·H, T, D] (cpu/kernels/transformer_kernels.h), with the contracts of
// exec/transformer_contracts.h; the CUDA backend's are in cuda_attention_table.cc.
#include <vector>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/transformer_kernels.h"
#include "exec/transformer_contracts.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindCausalAttention(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(AttentionDims a, checkCausalAttention(ctx));
  const int64_t slices = a.slices, t = a.t, tk = a.tk, d = a.d, group = a.group;
  const AttentionPositions at = a.positions;
  TensorView q = ctx.inputs[0], k = ctx.inputs[1], v = ctx.inputs[2], out = ctx.outputs[0],
             lse = ctx.outputs[1];
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalAttention(q.f32(), k.f32(), v.f32(), out.f32(), lse.f32(), slices, t, tk, d, scale,
                         at, *pool, group);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalAttentionGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(AttentionDims a, checkCausalAttentionGrad(ctx));
  const int64_t slices = a.slices, t = a.t, tk = a.tk, d = a.d, group = a.group;
  const AttentionPositions at = a.positions;
  std::vector<TensorView> in = ctx.inputs, out = ctx.outputs;
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalAttentionGrad(in[0].f32(), in[1].f32(), in[2].f32(), in[3].f32(), in[4].f32(),
                             in[5].f32(), out[0].f32(), out[1].f32(), out[2].f32(), slices, t, tk,
                             d, scale, at, *pool, group);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAttentionMerge(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const AttentionMergeDims m, checkAttentionMerge(ctx));
  std::vector<TensorView> in = ctx.inputs, out = ctx.outputs;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::attentionMerge(in[0].f32(), in[1].f32(), in[2].f32(), in[3].f32(), out[0].f32(),
                        out[1].f32(), m.rows, m.d, *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(attention_merge, bindAttentionMerge)
DTC_CPU_BINDER(causal_attention, bindCausalAttention)
DTC_CPU_BINDER(causal_attention_grad, bindCausalAttentionGrad)

}  // namespace dtc
