// Attention on the fused projection, as a pattern of the lowering onto kernels. GPT's attention
// reaches the kernels as layout ops around causal_attention: the projection's qkv [B, T, 3C] is
// split into q, k and v, each reshaped to [B, T, H, D] and transposed to [B, H, T, D]; the output
// is transposed back and reshaped to [B, T, C]; backward mirrors it (the incoming gradient
// unmerged, dq, dk and dv merged and concatenated into dqkv). Where the whole structure is there,
// it becomes `causal_attention_qkv`(qkv) -> (out [B, T, C], lse) and
// `causal_attention_qkv_grad`(dout [B, T, C], qkv, out, lse) -> dqkv [B, T, 3C]: no layout copy
// is left in the program, and a kernel that reads strided heads (cuDNN's) takes q, k and v where
// the projection wrote them. Backward keeps qkv instead of transposed copies of q, k and v (the
// same bytes). Runs after partitioning, on each device's program: a tensor-parallel rank's qkv
// holds its heads the same way.
//
// Attention on three projections is the same pattern with q, k and v each its own [B, T, ·]
// value (Llama's q_proj, k_proj, v_proj; k and v with fewer heads under grouped-query
// attention), and rotary embeddings between the projection and the transpose where the model
// applies them: `causal_attention_qkv`(q, k, v) and its gradient's (dq, dk, dv), the rotary
// steps on the projections' rows ([B, T, H, D], `seq_major`), so that again no transpose is
// left.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dtc {

void packAttention(mlir::func::FuncOp function);

}  // namespace dtc
