// Ops for convolutional networks: conv2d, max-pooling and batch normalisation (NCHW).
// Included by GraphOps.td.

def Graph_Conv2dOp : Graph_Op<"conv2d", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "2-D convolution (nn.Conv2d without bias), NCHW input, [O, C, kh, kw] weight";
  let arguments = (ins Graph_F32Tensor:$x, Graph_F32Tensor:$weight, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x `,` $weight attr-dict `:` type($x) `,` type($weight) `->` type($y)";
}
def Graph_Conv2dGradInputOp : Graph_Op<"conv2d_grad_input", [Pure]> {
  let summary = "Gradient of conv2d with respect to its input (shape given by the result type)";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$weight, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "$dy `,` $weight attr-dict `:` type($dy) `,` type($weight) `->` type($dx)";
}
def Graph_Conv2dGradWeightOp : Graph_Op<"conv2d_grad_weight", [Pure]> {
  let summary = "Gradient of conv2d with respect to its weight (shape given by the result type)";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$x, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs Graph_F32Tensor:$dweight);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($dy) `,` type($x) `->` type($dweight)";
}

def Graph_MaxPool2dOp : Graph_Op<"max_pool2d", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Max over kernel windows (nn.MaxPool2d, no padding), NCHW";
  let arguments = (ins Graph_F32Tensor:$x, DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($y)";
}
def Graph_MaxPool2dGradOp : Graph_Op<"max_pool2d_grad", [Pure]> {
  let summary = "Routes dy to the first maximum of each window of x";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$x, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "$dy `,` $x attr-dict `:` type($dy) `,` type($x) `->` type($dx)";
}

def Graph_BatchNormTrainOp : Graph_Op<"batch_norm_train", [Pure, InferTypeOpAdaptor,
    Graph_Differentiable]> {
  let summary = "BatchNorm2d in training mode: batch statistics, running statistics updated";
  let description = [{
    Normalises each channel of NCHW `x` with its batch mean and biased variance. Also returns
    the per-channel mean and rstd (for the backward pass) and the running statistics after
    this batch, as PyTorch: running = (1 − momentum)·running + momentum·stat, with the unbiased
    variance (n/(n−1)) for the running variance.
  }];
  let arguments = (ins Graph_F32Tensor:$x, Graph_F32Tensor:$weight, Graph_F32Tensor:$bias,
                       Graph_F32Tensor:$running_mean, Graph_F32Tensor:$running_var,
                       F32Attr:$eps, F32Attr:$momentum);
  let results = (outs Graph_F32Tensor:$y, Graph_F32Tensor:$mean, Graph_F32Tensor:$rstd,
                      Graph_F32Tensor:$new_running_mean, Graph_F32Tensor:$new_running_var);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_BatchNormTrainGradOp : Graph_Op<"batch_norm_train_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of batch_norm_train with respect to x, weight and bias";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$x, Graph_F32Tensor:$weight,
                       Graph_F32Tensor:$mean, Graph_F32Tensor:$rstd);
  let results = (outs Graph_F32Tensor:$dx, Graph_F32Tensor:$dweight, Graph_F32Tensor:$dbias);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_BatchNormEvalOp : Graph_Op<"batch_norm_eval", [Pure, InferTypeOpAdaptor]> {
  let summary = "BatchNorm2d in evaluation mode: normalise with the running statistics";
  let arguments = (ins Graph_F32Tensor:$x, Graph_F32Tensor:$weight, Graph_F32Tensor:$bias,
                       Graph_F32Tensor:$running_mean, Graph_F32Tensor:$running_var,
                       F32Attr:$eps);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// Synchronised BatchNorm: batch_norm_train and its gradient cut at their per-channel sums, so a
// partitioned batch all-reduces 2·C values per BatchNorm instead of gathering activations.
// dtc-sync-batch-norm rewrites to these before partitioning; `count` is the number of values
// per channel in the whole batch. They appear after autodiff only (no gradient rules).

def Graph_BatchNormSumOp : Graph_Op<"batch_norm_sum", [Pure, InferTypeOpAdaptor]> {
  let summary = "Per-channel sum of NCHW x over N, H, W";
  let arguments = (ins Graph_F32Tensor:$x);
  let results = (outs Graph_F32Tensor:$sum);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($sum)";
}
def Graph_BatchNormCenteredSquaresOp : Graph_Op<"batch_norm_centered_squares",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "Per-channel Σ (x − sum/count)²";
  let arguments = (ins Graph_F32Tensor:$x, Graph_F32Tensor:$sum, I64Attr:$count);
  let results = (outs Graph_F32Tensor:$squares);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_BatchNormNormalizeOp : Graph_Op<"batch_norm_normalize", [Pure, InferTypeOpAdaptor]> {
  let summary = "batch_norm_train's results from the whole batch's sum and centered squares";
  let arguments = (ins Graph_F32Tensor:$x, Graph_F32Tensor:$sum, Graph_F32Tensor:$squares,
                       Graph_F32Tensor:$weight, Graph_F32Tensor:$bias,
                       Graph_F32Tensor:$running_mean, Graph_F32Tensor:$running_var,
                       I64Attr:$count, F32Attr:$eps, F32Attr:$momentum);
  let results = (outs Graph_F32Tensor:$y, Graph_F32Tensor:$mean, Graph_F32Tensor:$rstd,
                      Graph_F32Tensor:$new_running_mean, Graph_F32Tensor:$new_running_var);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_BatchNormGradSumsOp : Graph_Op<"batch_norm_grad_sums", [Pure, InferTypeOpAdaptor]> {
  let summary = "Per-channel Σ dy and Σ dy·xhat: the bias and weight gradients";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$x, Graph_F32Tensor:$mean,
                       Graph_F32Tensor:$rstd);
  let results = (outs Graph_F32Tensor:$dbias, Graph_F32Tensor:$dweight);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_BatchNormGradInputOp : Graph_Op<"batch_norm_grad_input", [Pure, InferTypeOpAdaptor]> {
  let summary = "The input gradient of batch_norm_train from the whole batch's gradient sums";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$x, Graph_F32Tensor:$weight,
                       Graph_F32Tensor:$mean, Graph_F32Tensor:$rstd, Graph_F32Tensor:$dbias,
                       Graph_F32Tensor:$dweight, I64Attr:$count);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
