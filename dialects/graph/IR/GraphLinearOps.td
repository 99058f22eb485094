// nn.Linear on tensors of any rank >= 2, keeping the leading dimensions (a batch and a sequence)
// as they are: sharding propagation can then split the sequence through a linear layer, which
// a reshape to [rows, in] would merge away. Included by GraphOps.td.

def Graph_LinearOp : Graph_Op<"linear", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "x·weightᵀ over the last dimension: [..., K] and [N, K] give [..., N]";
  let arguments = (ins Graph_FloatTensor:$x, Graph_FloatTensor:$weight);
  let results = (outs Graph_FloatTensor:$y);
  let assemblyFormat = "$x `,` $weight attr-dict `:` type($x) `,` type($weight) `->` type($y)";
}
def Graph_LinearGradInputOp : Graph_Op<"linear_grad_input", [Pure, InferTypeOpAdaptor]> {
  let summary = "dy·weight: [..., N] and [N, K] give [..., K]";
  let arguments = (ins Graph_FloatTensor:$dy, Graph_FloatTensor:$weight);
  let results = (outs Graph_FloatTensor:$dx);
  let assemblyFormat = "$dy `,` $weight attr-dict `:` type($dy) `,` type($weight) `->` type($dx)";
}
def Graph_LinearGradWeightOp : Graph_Op<"linear_grad_weight", [Pure, InferTypeOpAdaptor]> {
  let summary = "Σ over the leading dimensions of dyᵀ·x: [..., N] and [..., K] give [N, K]";
  let arguments = (ins Graph_FloatTensor:$dy, Graph_FloatTensor:$x);
  let results = (outs Graph_FloatTensor:$dweight);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($dy) `,` type($x) `->` type($dweight)";
}

// Fused epilogues (dtc-fuse-epilogues, after partitioning): the bias add, the tanh GELU and the
// GELU gradient ride on the contraction, as cuBLASLt's epilogues run them. x and weight are
// f32 or one 16-bit type; the product is accumulated in f32 and never rounded, the bias and
// the results are f32 — except y of linear_bias(_gelu), which dtc-fold-casts may make x's
// 16-bit type (the f32 result rounded once) when 16-bit contractions are all that read it.
def Graph_LinearBiasOp : Graph_Op<"linear_bias", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "x·weightᵀ + bias: [..., K], [N, K] and [N] give [..., N] (f32)";
  let arguments = (ins Graph_FloatTensor:$x, Graph_FloatTensor:$weight, Graph_F32Tensor:$bias);
  let results = (outs Graph_FloatTensor:$y);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_LinearBiasGeluOp : Graph_Op<"linear_bias_gelu", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "pre = x·weightᵀ + bias and y = gelu(pre), PyTorch's tanh approximation";
  let description = [{
    `pre` is what the backward pass keeps for the GELU gradient (linear_grad_input_gelu).
  }];
  let arguments = (ins Graph_FloatTensor:$x, Graph_FloatTensor:$weight, Graph_F32Tensor:$bias);
  let results = (outs Graph_FloatTensor:$y, Graph_F32Tensor:$pre);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_LinearGradInputGeluOp : Graph_Op<"linear_grad_input_gelu", [Pure, InferTypeOpAdaptor]> {
  let summary = "(dy·weight) · gelu'(pre): the input gradient of a linear fed by a tanh GELU, "
                "taken through the GELU";
  let arguments = (ins Graph_FloatTensor:$dy, Graph_FloatTensor:$weight, Graph_F32Tensor:$pre);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
