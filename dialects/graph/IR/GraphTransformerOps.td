// Ops for transformers: batched matmul, layout changes, causal softmax, LayerNorm, embedding.
// Included by GraphOps.td (one TableGen unit per dialect).

def Graph_BatchMatmulOp : Graph_Op<"batch_matmul", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "op(lhs[b]) · op(rhs[b]) over equal leading batch dimensions";
  let description = [{
    lhs is [B..., M, K] ([B..., K, M] with transpose_lhs), rhs is [B..., K, N] ([B..., N, K]
    with transpose_rhs); the result is [B..., M, N]. Attention scores are
    `batch_matmul(q, k) {transpose_rhs}` on [batch, heads, T, head_dim].
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

def Graph_TransposeOp : Graph_Op<"transpose", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Permute dimensions: result.shape[i] = x.shape[perm[i]]";
  // Layout ops move elements of any float type (16-bit ones after dtc-fold-casts, FP8 codes
  // after their gather).
  let arguments = (ins Graph_MovableTensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Graph_MovableTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Graph_SplitOp : Graph_Op<"split", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Split into `parts` pieces along `axis`: equal ones, or `sizes` long";
  let description = [{
    Equal pieces shard like the whole (a dimension cut into tp blocks of each piece: Megatron's
    QKV split). Pieces of `sizes` (a slice and the rest, grouped-query attention's q, k, v) need
    the split dimension whole.
  }];
  let arguments = (ins Graph_LayoutTensor:$x, I64Attr:$axis, I64Attr:$parts,
                       OptionalAttr<DenseI64ArrayAttr>:$sizes);
  let results = (outs Variadic<Graph_LayoutTensor>:$pieces);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($pieces)";
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "int64_t":$axis, "int64_t":$parts), [{
      build($_builder, $_state, x, axis, parts, ::mlir::DenseI64ArrayAttr());
    }]>,
  ];
}

def Graph_ConcatOp : Graph_Op<"concat", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Concatenate pieces along `axis` (their other dimensions equal)";
  let arguments = (ins Variadic<Graph_FloatTensor>:$pieces, I64Attr:$axis);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$pieces attr-dict `:` type($pieces) `->` type($result)";
}

def Graph_CausalSoftmaxOp : Graph_Op<"causal_softmax", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Graph_Differentiable]> {
  let summary = "softmax(scale · x) over the last dimension with a causal mask";
  let description = [{
    x is [..., T, T] (query × key). Entry (i, j) with j > i is masked out (0 in the result),
    as attention with `is_causal=True`.
  }];
  let arguments = (ins Graph_F32Tensor:$x, F32Attr:$scale);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}
def Graph_CausalSoftmaxGradOp : Graph_Op<"causal_softmax_grad", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType]> {
  let summary = "Gradient of causal_softmax from its output y";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$y, F32Attr:$scale);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "$dy `,` $y attr-dict `:` type($dx)";
}

def Graph_SoftmaxOp : Graph_Op<"softmax", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Graph_Differentiable]> {
  let summary = "softmax(scale · x) over the last dimension (F.softmax(x, dim=-1)), or its log";
  let description = [{
    With `log`, y = log_softmax(scale · x) (F.log_softmax), computed from the row's maximum
    and log-sum-exp rather than as the log of a probability that may underflow.
  }];
  let arguments = (ins Graph_F32Tensor:$x, DefaultValuedAttr<F32Attr, "1.0f">:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$log);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}
def Graph_SoftmaxGradOp : Graph_Op<"softmax_grad", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType]> {
  let summary = "Gradient of softmax (or log-softmax, with `log`) from its output y";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$y,
                       DefaultValuedAttr<F32Attr, "1.0f">:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$log);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "$dy `,` $y attr-dict `:` type($dx)";
}

def Graph_CausalAttentionOp : Graph_Op<"causal_attention", [Pure, InferTypeOpAdaptor,
    Graph_Differentiable]> {
  let summary = "softmax(scale · q·kᵀ, causal) · v on [..., T, D], without keeping the [T, T] scores";
  let description = [{
    Flash-style attention (dtc-fuse-attention fuses batch_matmul → causal_softmax →
    batch_matmul into it): `out` is the attention output and `lse` [..., T] the log-sum-exp of
    each query's scaled scores, all the backward pass keeps (it recomputes the probabilities).
  }];
  // q, k, v and out share one element type (bf16/f16 under mixed precision: the kernels
  // accumulate in f32); lse is always f32.
  let arguments = (ins Graph_FloatTensor:$q, Graph_FloatTensor:$k, Graph_FloatTensor:$v, F32Attr:$scale);
  let results = (outs Graph_FloatTensor:$out, Graph_F32Tensor:$lse);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_CausalAttentionGradOp : Graph_Op<"causal_attention_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of causal_attention with respect to q, k and v";
  let arguments = (ins Graph_FloatTensor:$dout, Graph_FloatTensor:$q, Graph_FloatTensor:$k,
                       Graph_FloatTensor:$v, Graph_FloatTensor:$out, Graph_F32Tensor:$lse,
                       F32Attr:$scale);
  let results = (outs Graph_FloatTensor:$dq, Graph_FloatTensor:$dk, Graph_FloatTensor:$dv);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_AttentionMergeOp : Graph_Op<"attention_merge", [Pure, InferTypeOpAdaptor]> {
  let summary = "Attention of the same queries over two sets of keys, merged into attention over "
                "both by the log-sum-exps";
  let description = [{
    out = (out_a·exp(lse_a) + out_b·exp(lse_b)) / (exp(lse_a) + exp(lse_b)) and lse the
    log-sum-exp of both, computed stably; a query that saw no key of a set has lse −inf there
    (and out 0). Ring attention merges each block of keys' result into the running one.
  }];
  let arguments = (ins Graph_FloatTensor:$out_a, Graph_F32Tensor:$lse_a,
                       Graph_FloatTensor:$out_b, Graph_F32Tensor:$lse_b);
  let results = (outs Graph_FloatTensor:$out, Graph_F32Tensor:$lse);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_SwigluOp : Graph_Op<"swiglu", [Pure, AllShapesMatch<["gate", "up", "y"]>,
    Graph_Differentiable, Graph_LowPrecisionStorage]> {
  let summary = "SwiGLU's gate: silu(gate) · up, element-wise (a Llama MLP's product)";
  let description = [{
    Any operand and the result may be bf16/f16 (the math in f32, dtc-fold-casts).
  }];
  let arguments = (ins Graph_FloatTensor:$gate, Graph_FloatTensor:$up);
  let results = (outs Graph_FloatTensor:$y);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_SwigluGradOp : Graph_ElementwiseGradOp<"swiglu_grad", [Pure,
    AllShapesMatch<["dy", "gate", "up", "dgate", "dup"]>, Graph_LowPrecisionStorage]> {
  let summary = "Gradients of swiglu with respect to gate and up";
  let description = [{
    Any operand and result may be bf16/f16 (the math in f32, dtc-fold-casts).
  }];
  let arguments = (ins Graph_FloatTensor:$dy, Graph_FloatTensor:$gate, Graph_FloatTensor:$up);
  let results = (outs Graph_FloatTensor:$dgate, Graph_FloatTensor:$dup);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_RotaryOp : Graph_Op<"rotary", [Pure, Graph_Differentiable,
    AllShapesMatch<["x", "y"]>, Graph_LowPrecisionStorage]> {
  let summary = "Rotary position embeddings: x·cos + rotate_half(x)·sin over [..., T, D]";
  let description = [{
    rotate_half(x) = [−x₂, x₁] of the two halves of the last dimension (transformers'
    apply_rotary_pos_emb); cos and sin hold T·D values ([T, D], leading dimensions of size 1
    allowed), the same for every leading index of x. They are tables, not trained: only x has a
    gradient (rotary_grad, the rotation's transpose). x and y may be bf16/f16 (the math in f32,
    dtc-fold-casts); the tables are f32.
  }];
  let arguments = (ins Graph_FloatTensor:$x, Graph_F32Tensor:$cos, Graph_F32Tensor:$sin);
  let results = (outs Graph_FloatTensor:$y);
  let assemblyFormat = "operands attr-dict `:` type($x) `,` type($cos) `,` type($sin) `->` type($y)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // Why x, cos and sin cannot make a rotary, or nullopt: what inference and importers refuse (an importer
    // must refuse bad shapes before building; a failing inference in a builder is fatal).
    static std::optional<std::string> checkShapes(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> cos,
                                                   llvm::ArrayRef<int64_t> sin);
  }];
}
def Graph_RotaryGradOp : Graph_Op<"rotary_grad", [Pure, AllShapesMatch<["dy", "dx"]>,
    Graph_LowPrecisionStorage]> {
  let summary = "The gradient of rotary with respect to x: dy·cos + rotate_halfᵀ(dy·sin)";
  let description = [{
    dy and dx may be bf16/f16 (the math in f32, dtc-fold-casts); the tables are f32.
  }];
  let arguments = (ins Graph_FloatTensor:$dy, Graph_F32Tensor:$cos, Graph_F32Tensor:$sin);
  let results = (outs Graph_FloatTensor:$dx);
  let assemblyFormat = "operands attr-dict `:` type($dy) `,` type($cos) `,` type($sin) `->` type($dx)";
}

def Graph_EmbeddingOp : Graph_Op<"embedding", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Rows of `table` [V, C] selected by int64 `ids`: result is ids.shape + [C]";
  let description = [{
    `padding_idx` (nn.Embedding's): that row gets no gradient, so training never moves it.
  }];
  let arguments = (ins Graph_F32Tensor:$table, Graph_LabelTensor:$ids,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` type($table) `,` type($ids) `->` type($result)";
}
def Graph_EmbeddingGradOp : Graph_Op<"embedding_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Scatter-add of dy's rows into a [vocab, C] gradient";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_LabelTensor:$ids, I64Attr:$vocab,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Graph_F32Tensor:$dtable);
  let assemblyFormat = "$dy `,` $ids attr-dict `:` type($dy) `,` type($ids) `->` type($dtable)";
}
