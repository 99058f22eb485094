// causal_attention_qkv and its gradient on the CPU: the heads are unpacked from the fused
// projection into [B, H, T, D] blocks of the step's scratch (ops/packed_attention.h), the
// causal_attention(_grad) binder runs on them, and the result is packed back, so the arithmetic
// is the unpacked kernels' bit for bit. 16-bit operands arrive widened (bindWidened).
#include <cstring>

#include "cpu_binders.h"
#include "exec/transformer_contracts.h"

namespace dtc {
namespace {

// Row (b, t) of a packed [B, T, width] tensor holds head h's D values at column offset + h·D.
void unpackHeads(const float* packed, int64_t width, int64_t offset, const PackedAttentionDims& a,
                 float* heads) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t t = 0; t < a.t; ++t)
        std::memcpy(heads + ((b * a.heads + h) * a.t + t) * a.d,
                    packed + (b * a.t + t) * width + offset + h * a.d, a.d * sizeof(float));
}

void packHeads(const float* heads, const PackedAttentionDims& a, float* packed, int64_t width,
               int64_t offset) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t t = 0; t < a.t; ++t)
        std::memcpy(packed + (b * a.t + t) * width + offset + h * a.d,
                    heads + ((b * a.heads + h) * a.t + t) * a.d, a.d * sizeof(float));
}

TensorView blockView(uint8_t* at, const PackedAttentionDims& a) {
  return TensorView{at, DType::kF32, {a.batch, a.heads, a.t, a.d}};
}

StatusOr<BoundStep> bindCausalAttentionQkv(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PackedAttentionDims a, checkCausalAttentionQkv(ctx));
  const PackedAttentionScratch s = packedAttentionScratch(a, sizeof(float), false);
  const StepBuffer buffer = stepBuffer(ctx, s.inner);
  const uint64_t n = a.block() * sizeof(float);
  TensorView q = blockView(buffer.data + s.qkv, a), k = blockView(buffer.data + s.qkv + n, a),
             v = blockView(buffer.data + s.qkv + 2 * n, a), o = blockView(buffer.data + s.out, a);
  StepContext unpacked{ctx.step, {q, k, v}, {o, ctx.outputs[1]}, ctx.pool, ctx.mesh};
  DTC_ASSIGN_OR_RETURN(BoundStep attention, bindCpu_causal_attention(unpacked));
  const TensorView qkv = ctx.inputs[0], out = ctx.outputs[0];
  const int64_t c = a.heads * a.d;
  const std::shared_ptr<std::vector<uint8_t>> owned = buffer.owned;
  return BoundStep([=] {
    for (int part = 0; part < 3; ++part)
      unpackHeads(qkv.f32(), 3 * c, part * c, a, (part == 0 ? q : part == 1 ? k : v).f32());
    DTC_RETURN_IF_ERROR(attention());
    packHeads(o.f32(), a, out.f32(), c, 0);
    (void)owned;
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalAttentionQkvGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PackedAttentionDims a, checkCausalAttentionQkvGrad(ctx));
  const PackedAttentionScratch s = packedAttentionScratch(a, sizeof(float), true);
  const StepBuffer buffer = stepBuffer(ctx, s.inner);
  const uint64_t n = a.block() * sizeof(float);
  uint8_t* base = buffer.data;
  TensorView q = blockView(base + s.qkv, a), k = blockView(base + s.qkv + n, a),
             v = blockView(base + s.qkv + 2 * n, a), o = blockView(base + s.out, a),
             dout = blockView(base + s.dout, a), dq = blockView(base + s.dqkv, a),
             dk = blockView(base + s.dqkv + n, a), dv = blockView(base + s.dqkv + 2 * n, a);
  StepContext unpacked{
      ctx.step, {dout, q, k, v, o, ctx.inputs[3]}, {dq, dk, dv}, ctx.pool, ctx.mesh};
  DTC_ASSIGN_OR_RETURN(BoundStep attention, bindCpu_causal_attention_grad(unpacked));
  const TensorView packedDout = ctx.inputs[0], qkv = ctx.inputs[1], out = ctx.inputs[2],
                   dqkv = ctx.outputs[0];
  const int64_t c = a.heads * a.d;
  const std::shared_ptr<std::vector<uint8_t>> owned = buffer.owned;
  return BoundStep([=] {
    for (int part = 0; part < 3; ++part)
      unpackHeads(qkv.f32(), 3 * c, part * c, a, (part == 0 ? q : part == 1 ? k : v).f32());
    unpackHeads(out.f32(), c, 0, a, o.f32());
    unpackHeads(packedDout.f32(), c, 0, a, dout.f32());
    DTC_RETURN_IF_ERROR(attention());
    for (int part = 0; part < 3; ++part)
      packHeads((part == 0 ? dq : part == 1 ? dk : dv).f32(), a, dqkv.f32(), 3 * c, part * c);
    (void)owned;
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(causal_attention_qkv, bindCausalAttentionQkv)
DTC_CPU_BINDER(causal_attention_qkv_grad, bindCausalAttentionQkvGrad)

}  // namespace dtc
