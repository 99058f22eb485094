// causal_attention_qkv and its gradient on the CPU: the heads are unpacked from the projections
// (the fused one, or q, k and v apart) into [B, H, T, D] blocks of the step's scratch
// (ops/packed_attention.h), the causal_attention(_grad) binder runs on them, and the result is
// packed back, so the arithmetic is the unpacked kernels' bit for bit. 16-bit operands arrive
// widened (bindWidened).
#include <array>
#include <cstring>

#include "cpu_binders.h"
#include "exec/transformer_contracts.h"

namespace dtc {
namespace {

// Where one operand's heads lie in its projection: rows (b, t) of `width` floats, head h's D
// values at column offset + h·D.
struct Rows {
  float* data = nullptr;
  int64_t width = 0, offset = 0, heads = 0;
};

void unpackHeads(const Rows& from, const PackedAttentionDims& a, float* heads) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < from.heads; ++h)
      for (int64_t t = 0; t < a.t; ++t)
        std::memcpy(heads + ((b * from.heads + h) * a.t + t) * a.d,
                    from.data + (b * a.t + t) * from.width + from.offset + h * a.d,
                    a.d * sizeof(float));
}

void packHeads(const float* heads, const PackedAttentionDims& a, const Rows& to) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < to.heads; ++h)
      for (int64_t t = 0; t < a.t; ++t)
        std::memcpy(to.data + (b * a.t + t) * to.width + to.offset + h * a.d,
                    heads + ((b * to.heads + h) * a.t + t) * a.d, a.d * sizeof(float));
}

// q, k and v (or their gradients) from `first` in `list`: three projections, or the fused one.
std::array<Rows, 3> projections(const std::vector<TensorView>& list, size_t first, bool three,
                                const PackedAttentionDims& a) {
  const int64_t c = a.heads * a.d, ck = a.kvHeads * a.d;
  if (!three) {
    float* qkv = list[first].f32();
    return {Rows{qkv, 3 * c, 0, a.heads}, Rows{qkv, 3 * c, c, a.heads},
            Rows{qkv, 3 * c, 2 * c, a.heads}};
  }
  return {Rows{list[first].f32(), c, 0, a.heads}, Rows{list[first + 1].f32(), ck, 0, a.kvHeads},
          Rows{list[first + 2].f32(), ck, 0, a.kvHeads}};
}

TensorView blockView(uint8_t* at, const PackedAttentionDims& a, int64_t heads) {
  return TensorView{at, DType::kF32, {a.batch, heads, a.t, a.d}};
}

StatusOr<BoundStep> bindCausalAttentionQkv(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PackedAttentionDims a, checkCausalAttentionQkv(ctx));
  const PackedAttentionScratch s = packedAttentionScratch(a, sizeof(float), false);
  const StepBuffer buffer = stepBuffer(ctx, s.inner);
  uint8_t* base = buffer.data;
  TensorView q = blockView(base + s.qkv, a, a.heads), k = blockView(base + s.k, a, a.kvHeads),
             v = blockView(base + s.v, a, a.kvHeads), o = blockView(base + s.out, a, a.heads);
  StepContext unpacked{ctx.step, {q, k, v}, {o, ctx.outputs[1]}, ctx.pool, ctx.mesh};
  DTC_ASSIGN_OR_RETURN(BoundStep attention, bindCpu_causal_attention(unpacked));
  const std::array<Rows, 3> in = projections(ctx.inputs, 0, ctx.inputs.size() == 3, a);
  const Rows out{ctx.outputs[0].f32(), a.heads * a.d, 0, a.heads};
  const std::shared_ptr<std::vector<uint8_t>> owned = buffer.owned;
  return BoundStep([=] {
    unpackHeads(in[0], a, q.f32());
    unpackHeads(in[1], a, k.f32());
    unpackHeads(in[2], a, v.f32());
    DTC_RETURN_IF_ERROR(attention());
    packHeads(o.f32(), a, out);
    (void)owned;
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalAttentionQkvGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(PackedAttentionDims a, checkCausalAttentionQkvGrad(ctx));
  const PackedAttentionScratch s = packedAttentionScratch(a, sizeof(float), true);
  const StepBuffer buffer = stepBuffer(ctx, s.inner);
  uint8_t* base = buffer.data;
  TensorView q = blockView(base + s.qkv, a, a.heads), k = blockView(base + s.k, a, a.kvHeads),
             v = blockView(base + s.v, a, a.kvHeads), o = blockView(base + s.out, a, a.heads),
             dout = blockView(base + s.dout, a, a.heads), dq = blockView(base + s.dqkv, a, a.heads),
             dk = blockView(base + s.dqkv + s.k, a, a.kvHeads),
             dv = blockView(base + s.dqkv + s.v, a, a.kvHeads);
  const size_t n = ctx.inputs.size();  // (dout, qkv, out, lse) or (dout, q, k, v, out, lse)
  StepContext unpacked{
      ctx.step, {dout, q, k, v, o, ctx.inputs[n - 1]}, {dq, dk, dv}, ctx.pool, ctx.mesh};
  DTC_ASSIGN_OR_RETURN(BoundStep attention, bindCpu_causal_attention_grad(unpacked));
  const bool three = n == 6;
  const std::array<Rows, 3> in = projections(ctx.inputs, 1, three, a),
                            grads = projections(ctx.outputs, 0, three, a);
  const int64_t c = a.heads * a.d;
  const Rows out{ctx.inputs[n - 2].f32(), c, 0, a.heads},
      packedDout{ctx.inputs[0].f32(), c, 0, a.heads};
  const std::shared_ptr<std::vector<uint8_t>> owned = buffer.owned;
  return BoundStep([=] {
    unpackHeads(in[0], a, q.f32());
    unpackHeads(in[1], a, k.f32());
    unpackHeads(in[2], a, v.f32());
    unpackHeads(out, a, o.f32());
    unpackHeads(packedDout, a, dout.f32());
    DTC_RETURN_IF_ERROR(attention());
    packHeads(dq.f32(), a, grads[0]);
    packHeads(dk.f32(), a, grads[1]);
    packHeads(dv.f32(), a, grads[2]);
    (void)owned;
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(causal_attention_qkv, bindCausalAttentionQkv)
DTC_CPU_BINDER(causal_attention_qkv_grad, bindCausalAttentionQkvGrad)

}  // namespace dtc
