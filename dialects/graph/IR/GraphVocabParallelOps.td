// Cross-entropy cut so that the class (vocabulary) dimension can stay split over devices:
// no device ever holds a whole [rows, vocabulary] row. Rows are every
// index but the last (logits [..., V], per-row values [...]). dtc-vocab-parallel rewrites
// softmax_cross_entropy (and its gradient) into these after autodiff; `vocab_axes`, set by the
// partitioner, names the mesh axes splitting the vocabulary (a device's block starts at its
// index over them times the local vocabulary). Included by GraphOps.td.

def Graph_CrossEntropyRowMaxOp : Graph_Op<"cross_entropy_row_max", [Pure, InferTypeOpAdaptor]> {
  let summary = "Per row, the largest logit: [..., V] gives [...]";
  let arguments = (ins Graph_F32Tensor:$logits);
  let results = (outs Graph_F32Tensor:$row_max);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($row_max)";
}
def Graph_CrossEntropyPartsOp : Graph_Op<"cross_entropy_parts", [Pure, InferTypeOpAdaptor]> {
  let summary = "Per row, Σ exp(logit − row_max) and the label's logit (0 off this block)";
  let arguments = (ins Graph_F32Tensor:$logits, Graph_LabelTensor:$labels,
                       Graph_F32Tensor:$row_max, OptionalAttr<StrArrayAttr>:$vocab_axes,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Graph_F32Tensor:$sum_exp, Graph_F32Tensor:$target);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_CrossEntropyCombineOp : Graph_Op<"cross_entropy_combine", [Pure, InferTypeOpAdaptor]> {
  let summary = "Σ over rows of log(sum_exp) + row_max − target, divided by `count`";
  let description = [{
    With `ignore_index`, the rows whose label (the optional `labels` operand) is it add nothing.
  }];
  let arguments = (ins Graph_F32Tensor:$row_max, Graph_F32Tensor:$sum_exp,
                       Graph_F32Tensor:$target, Optional<Graph_LabelTensor>:$labels,
                       I64Attr:$count, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Graph_F32Scalar:$loss);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = Graph_SumsOverPositions;
}
def Graph_CrossEntropyPartsGradOp : Graph_Op<"cross_entropy_parts_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "dloss · (exp(logit − row_max) / sum_exp − onehot(label)) / count";
  let arguments = (ins Graph_F32Scalar:$dloss, Graph_F32Tensor:$logits,
                       Graph_LabelTensor:$labels, Graph_F32Tensor:$row_max,
                       Graph_F32Tensor:$sum_exp, I64Attr:$count,
                       OptionalAttr<StrArrayAttr>:$vocab_axes, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Graph_F32Tensor:$dlogits);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
