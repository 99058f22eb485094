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
def Graph_LinearGradWeightOp
    : Graph_Op<"linear_grad_weight", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Σ over the leading dimensions of dyᵀ·x: [..., N] and [..., K] give [N, K]";
  let description = [{
    The result is of the operands' element type, or f32 where they are 16-bit: the f32 sum
    unrounded, a weight gradient for f32 master weights (dtc-mixed-precision-gradients).
  }];
  let arguments = (ins Graph_FloatTensor:$dy, Graph_FloatTensor:$x);
  let results = (outs Graph_FloatTensor:$dweight);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($dy) `,` type($x) `->` type($dweight)";
}

