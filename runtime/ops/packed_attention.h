// Attention on the projections (causal_attention_qkv and its gradient): q, k and v are read
// where the projections wrote them, either one fused projection qkv [B, T, 3·H·D] (q, then k,
// then v, each H heads of D side by side) or three, q [B, T, H·D], k and v [B, T, Hk·D] (Hk
// dividing H: grouped-query attention), and the output is written with its heads merged,
// [B, T, H·D]. A backend without a kernel that reads that layout (the CPU's, the CUDA backend's
// own) unpacks the heads into contiguous [B, H, T, D] blocks ([B, Hk, T, D] for k and v) in the
// step's scratch, runs causal_attention(_grad) there and packs the result back. This is the
// layout of those blocks, shared by the scratch sizing (ops/step_scratch.cc) and the binders, so
// the plan and the binders cannot disagree.
#pragma once

#include <cstdint>

namespace dtc {

struct PackedAttentionDims {
  int64_t batch = 0, t = 0, heads = 0, d = 0;
  int64_t kvHeads = 0;  // k's and v's heads: `heads` on the fused projection
  // Elements of one [B, H, T, D] block (q, out), and of one [B, Hk, T, D] block (k, v).
  uint64_t block() const { return blockOf(heads); }
  uint64_t kvBlock() const { return blockOf(kvHeads); }

 private:
  uint64_t blockOf(int64_t h) const {
    return static_cast<uint64_t>(batch) * static_cast<uint64_t>(h) * static_cast<uint64_t>(t) *
           static_cast<uint64_t>(d);
  }
};

// Byte offsets in the scratch: q, k, v as one region (q's block, then k's and v's), then out
// [B, H, T, D]; the gradient also dout [B, H, T, D] and dq, dk, dv as one region laid out as the
// first; then the unpacked step's own scratch (`inner`). Regions start on 64-byte boundaries;
// `k` and `v` are the offsets of k's and v's blocks within a region.
struct PackedAttentionScratch {
  uint64_t qkv = 0, out = 0, dout = 0, dqkv = 0, inner = 0;
  uint64_t k = 0, v = 0;
};

inline PackedAttentionScratch packedAttentionScratch(const PackedAttentionDims& a,
                                                     uint64_t elementBytes, bool grad) {
  const auto aligned = [](uint64_t bytes) { return (bytes + 63) / 64 * 64; };
  const uint64_t block = aligned(a.block() * elementBytes);
  const uint64_t three = aligned((a.block() + 2 * a.kvBlock()) * elementBytes);
  PackedAttentionScratch s;
  s.k = a.block() * elementBytes;
  s.v = s.k + a.kvBlock() * elementBytes;
  s.qkv = 0;
  s.out = three;
  s.dout = s.out + block;
  s.dqkv = grad ? s.dout + block : s.dout;
  s.inner = grad ? s.dqkv + three : s.dout;
  return s;
}

}  // namespace dtc
