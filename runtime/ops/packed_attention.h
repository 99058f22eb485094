// Attention on the fused projection (causal_attention_qkv and its gradient): q, k and v are read
// where the projection wrote them, qkv [B, T, 3·H·D] (q, then k, then v, each H heads of D side
// by side), and the output is written with its heads merged, [B, T, H·D]. A backend without a
// kernel that reads that layout (the CPU's, the CUDA backend's own) unpacks the heads into
// contiguous [B, H, T, D] blocks in the step's scratch, runs causal_attention(_grad) there and
// packs the result back. This is the layout of those blocks, shared by the scratch sizing
// (ops/step_scratch.cc) and the binders, so the plan and the binders cannot disagree.
#pragma once

#include <cstdint>

namespace dtc {

struct PackedAttentionDims {
  int64_t batch = 0, t = 0, heads = 0, d = 0;
  // Elements of one [B, H, T, D] block.
  uint64_t block() const {
    return static_cast<uint64_t>(batch) * static_cast<uint64_t>(heads) * static_cast<uint64_t>(t) *
           static_cast<uint64_t>(d);
  }
};

// Byte offsets in the scratch: q, k, v as one [3, B, H, T, D] region, then out [B, H, T, D];
// the gradient also dout [B, H, T, D] and dq, dk, dv as one [3, B, H, T, D] region; then the
// unpacked step's own scratch (`inner`). Regions start on 64-byte boundaries.
struct PackedAttentionScratch {
  uint64_t qkv = 0, out = 0, dout = 0, dqkv = 0, inner = 0;
};

inline PackedAttentionScratch packedAttentionScratch(const PackedAttentionDims& a,
                                                     uint64_t elementBytes, bool grad) {
  const auto aligned = [](uint64_t bytes) { return (bytes + 63) / 64 * 64; };
  const uint64_t block = aligned(a.block() * elementBytes);
  const uint64_t three = aligned(3 * a.block() * elementBytes);
  PackedAttentionScratch s;
  s.qkv = 0;
  s.out = three;
  s.dout = s.out + block;
  s.dqkv = grad ? s.dout + block : s.dout;
  s.inner = grad ? s.dqkv + three : s.dout;
  return s;
}

}  // namespace dtc
