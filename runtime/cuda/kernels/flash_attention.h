// Host-side launchers of the flash-attention kernels (flash_attention.cu), the CUDA side of
// cpu/kernels/flash_attention.cc: causal attention over `slices` independent [T, D] slices (batch ×
// heads) without ever storing the [T, T] scores. Tiles of 64 queries × 64 keys go through shared
// memory. Every sum runs in a fixed order (no atomics), so a rerun gives the same bits. Outputs
// must not alias inputs (the memory planner never makes them).
//
// Element types: q, k, v, out, dout, dq, dk, dv are all float32, or all one of bfloat16 and
// float16 (mixed precision); lse is float32 either way. The 16-bit operands are widened exactly
// on load and all the math is the float32 kernels', the 16-bit outputs rounded once (to nearest
// even, as support/half.h): the CPU's widened path (cpu/cpu_kernel_table.cc, bindLowPrecision).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "launchers.h"
#include "ops/attention_positions.h"

namespace dtc::cuda::kernels {

// The largest head dimension the kernels take: a thread keeps 4 rows × D/16 columns of its
// accumulators in registers, and a [64, D] tile of q, k, v (and dout) sits in shared memory.
constexpr int64_t kFlashMaxHeadDim = 128;

// Dynamic shared memory per block of the largest of the kernels for head dimension d (what the
// device must allow a block to opt in to); 0 when d is outside [1, kFlashMaxHeadDim]. The same
// for every element type (the tiles hold float32).
uint64_t flashAttentionSharedBytes(int64_t d);

// out = softmax(scale·q·kᵀ, causal)·v and lse = each query's log-sum-exp of its scaled scores.
// q, k, v, out [slices, T, D] of `type`; lse [slices, T] float32. cudaErrorInvalidValue for a d
// the kernels do not take or a grid CUDA cannot launch (the binders check both first).
// With `tk` keys against the `t` queries, placed by `at` (context parallelism: a block of the
// queries, of the keys, the load-balanced layout; ops/attention_positions.h): query i sees key j
// when j's place in the original sequence is not after i's. A query that sees no key gets out 0
// and lse −inf (a ring's block that lies after it). Grouped-query attention: k and v hold
// slices / `group` slices, query slice s reading slice s / group (`group` must divide slices).
cudaError_t causalAttention(Float type, const void* q, const void* k, const void* v, void* out,
                            float* lse, int64_t slices, int64_t t, int64_t tk, int64_t d,
                            float scale, const AttentionPositions& at, cudaStream_t stream,
                            int64_t group = 1);
inline cudaError_t causalAttention(Float type, const void* q, const void* k, const void* v,
                                   void* out, float* lse, int64_t slices, int64_t t, int64_t d,
                                   float scale, cudaStream_t stream) {
  return causalAttention(type, q, k, v, out, lse, slices, t, t, d, scale, AttentionPositions{},
                         stream);
}
inline cudaError_t causalAttention(const float* q, const float* k, const float* v, float* out,
                                   float* lse, int64_t slices, int64_t t, int64_t d, float scale,
                                   cudaStream_t stream) {
  return causalAttention(Float::kF32, q, k, v, out, lse, slices, t, d, scale, stream);
}

// The FlashAttention-2 backward pass: dq, dk, dv from dout and the forward's out and lse. A
// pre-pass writes D_i = dout_i · out_i (float32) to `scratch` (causalAttentionGradScratchBytes);
// then one block per key tile accumulates dk and dv over the query tiles, and one block per query
// tile accumulates dq over the key tiles (the probabilities recomputed in both; no atomics).
// dout, q, k, v, out, dq, dk, dv of `type`; lse float32. With `group` > 1 each key tile's block
// sums over the query slices of its group in order.
cudaError_t causalAttentionGrad(Float type, const void* dout, const void* q, const void* k,
                                const void* v, const void* out, const float* lse, void* dq,
                                void* dk, void* dv, int64_t slices, int64_t t, int64_t tk,
                                int64_t d, float scale, const AttentionPositions& at, void* scratch,
                                cudaStream_t stream, int64_t group = 1);
inline cudaError_t causalAttentionGrad(Float type, const void* dout, const void* q, const void* k,
                                       const void* v, const void* out, const float* lse, void* dq,
                                       void* dk, void* dv, int64_t slices, int64_t t, int64_t d,
                                       float scale, void* scratch, cudaStream_t stream) {
  return causalAttentionGrad(type, dout, q, k, v, out, lse, dq, dk, dv, slices, t, t, d, scale,
                             AttentionPositions{}, scratch, stream);
}
inline cudaError_t causalAttentionGrad(const float* dout, const float* q, const float* k,
                                       const float* v, const float* out, const float* lse,
                                       float* dq, float* dk, float* dv, int64_t slices, int64_t t,
                                       int64_t d, float scale, void* scratch, cudaStream_t stream) {
  return causalAttentionGrad(Float::kF32, dout, q, k, v, out, lse, dq, dk, dv, slices, t, d, scale,
                             scratch, stream);
}

}  // namespace dtc::cuda::kernels
