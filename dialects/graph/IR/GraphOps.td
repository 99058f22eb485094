#ifndef DTC_GRAPH_OPS_TD
#define DTC_GRAPH_OPS_TD

include "GraphDialect.td"
include "GraphInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Graph_F32Tensor : RankedTensorOf<[F32]>;
// Contractions run in bf16/f16 under mixed precision (--precision), everything else in f32.
def Graph_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
// What a layout op moves: floats, and FP8 codes (a transposed copy made after their gather).
def Graph_MovableTensor : RankedTensorOf<[F32, BF16, F16, F8E4M3FN, F8E5M2]>;
def Graph_LabelTensor : RankedTensorOf<[I64]>;
// What a layout op moves: floats, or int64 labels (a causal LM's shifted labels are a slice).
def Graph_LayoutTensor : RankedTensorOf<[F32, BF16, F16, I64]>;
def Graph_F32Scalar : 0DTensorOf<[F32]>;

def Graph_Differentiable : DeclareOpInterfaceMethods<Graph_GradientOpInterface>;
def Graph_LowPrecisionStorage : DeclareOpInterfaceMethods<Graph_LowPrecisionStorageOpInterface>;

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

// y = f(x), same type. The result type is inferred from the operand. Elementwise: the sharding
// rule (every dimension passes through) follows from the trait.
class Graph_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Graph_ElementwiseOp<mnemonic, !listconcat([Pure, InferTypeOpInterface,
                                                 SameOperandsAndResultType, Elementwise],
                                                traits)> {
  let arguments = (ins Graph_F32Tensor:$x);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

// The gradient of an activation: dx = dy · f'(at), where `at` is the input or the output of
// the forward op, as the op's description says.
class Graph_ActivationGradOp<string mnemonic, list<Trait> traits = []>
    : Graph_ElementwiseGradOp<mnemonic, !listconcat([Pure, InferTypeOpInterface,
                                                     SameOperandsAndResultType, Elementwise],
                                                    traits)> {
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$at);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "$dy `,` $at attr-dict `:` type($dx)";
}

// An activation y = f(x) whose gradient is `gradOp`(dy, at), `at` being the forward input ("X")
// or output ("Y"): its gradient rule is generated here, its kernels from its math
// (ops/pointwise_math.h, declared by DTC_POINTWISE in ops/kernels.def).
class Graph_ActivationOp<string mnemonic, string gradOp, string at>
    : Graph_UnaryOp<mnemonic, [Graph_Differentiable]> {
  let extraClassDefinition = Graph_ElementwiseRules # [{
    ::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>
    $cppClass::buildGradients(::mlir::OpBuilder &b, ::mlir::ValueRange dys) {
      return ::llvm::SmallVector<::mlir::Value>{}] # gradOp #
      [{::create(b, getLoc(), dys[0], get}] # at # [{())};
    }
  }];
}

def Graph_CastOp : Graph_ElementwiseOp<"cast", [Pure, Graph_Differentiable]> {
  let summary = "x in the result's element type (f32, bf16, f16; rounding to nearest even)";
  let description = [{
    Mixed precision: the operands of contractions are cast to bf16 or f16 and their results
    back to f32 (dtc-mixed-precision). The gradient casts back to the operand's type. An int64
    operand is data (an attention mask the data holds) cast to f32; it has no gradient.
  }];
  let arguments = (ins Graph_LayoutTensor:$x);
  let results = (outs Graph_FloatTensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($y)";
  let hasVerifier = 1;
}

def Graph_ReluOp : Graph_ActivationOp<"relu", "ReluGradOp", "X"> {
  let summary = "max(x, 0)";
}
def Graph_ReluGradOp : Graph_ActivationGradOp<"relu_grad"> {
  let summary = "dy where the forward input `at` > 0, else 0";
}
def Graph_TanhOp : Graph_ActivationOp<"tanh", "TanhGradOp", "Y"> {
  let summary = "tanh(x)";
}
def Graph_TanhGradOp : Graph_ActivationGradOp<"tanh_grad"> {
  let summary = "dy · (1 − at²), where `at` is the forward output tanh(x)";
}
def Graph_SigmoidOp : Graph_ActivationOp<"sigmoid", "SigmoidGradOp", "Y"> {
  let summary = "1 / (1 + exp(−x))";
}
def Graph_SigmoidGradOp : Graph_ActivationGradOp<"sigmoid_grad"> {
  let summary = "dy · at · (1 − at), where `at` is the forward output sigmoid(x)";
}
def Graph_SiluOp : Graph_ActivationOp<"silu", "SiluGradOp", "X"> {
  let summary = "x · sigmoid(x) (SiLU, also called Swish)";
}
def Graph_SiluGradOp : Graph_ActivationGradOp<"silu_grad"> {
  let summary = "dy · σ(at) · (1 + at · (1 − σ(at))), where `at` is the forward input x";
}

def Graph_ExpOp : Graph_ActivationOp<"exp", "ExpGradOp", "Y"> { let summary = "exp(x)"; }
def Graph_ExpGradOp : Graph_ActivationGradOp<"exp_grad"> {
  let summary = "dy · at, where `at` is the forward output exp(x)";
}
def Graph_LogOp : Graph_ActivationOp<"log", "LogGradOp", "X"> { let summary = "ln(x)"; }
def Graph_LogGradOp : Graph_ActivationGradOp<"log_grad"> {
  let summary = "dy / at, where `at` is the forward input x";
}
def Graph_SqrtOp : Graph_ActivationOp<"sqrt", "SqrtGradOp", "Y"> { let summary = "√x"; }
def Graph_SqrtGradOp : Graph_ActivationGradOp<"sqrt_grad"> {
  let summary = "dy / (2 · at), where `at` is the forward output √x";
}
def Graph_ReciprocalOp : Graph_ActivationOp<"reciprocal", "ReciprocalGradOp", "Y"> {
  let summary = "1 / x";
}
def Graph_ReciprocalGradOp : Graph_ActivationGradOp<"reciprocal_grad"> {
  let summary = "−dy · at², where `at` is the forward output 1/x";
}
def Graph_ErfOp : Graph_ActivationOp<"erf", "ErfGradOp", "X"> { let summary = "erf(x)"; }
def Graph_ErfGradOp : Graph_ActivationGradOp<"erf_grad"> {
  let summary = "dy · 2/√π · exp(−at²), where `at` is the forward input x";
}
def Graph_AbsOp : Graph_ActivationOp<"abs", "AbsGradOp", "X"> { let summary = "|x|"; }
def Graph_AbsGradOp : Graph_ActivationGradOp<"abs_grad"> {
  let summary = "dy · sign(at), where `at` is the forward input x";
}
def Graph_SoftplusOp : Graph_ActivationOp<"softplus", "SoftplusGradOp", "X"> {
  let summary = "log(1 + exp(x)), x itself above 20 (F.softplus)";
}
def Graph_SoftplusGradOp : Graph_ActivationGradOp<"softplus_grad"> {
  let summary = "dy · sigmoid(at) (dy above 20), where `at` is the forward input x";
}

def Graph_PowOp : Graph_ElementwiseOp<"pow", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Elementwise, Graph_Differentiable]> {
  let summary = "x ^ exponent, a constant exponent";
  let arguments = (ins Graph_F32Tensor:$x, F32Attr:$exponent);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Graph_GeluOp : Graph_ElementwiseOp<"gelu", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Graph_Differentiable]> {
  let summary = "GELU, exact (erf) or PyTorch's tanh approximation";
  let arguments = (ins Graph_F32Tensor:$x, DefaultValuedAttr<BoolAttr, "false">:$approximate_tanh);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}
def Graph_GeluGradOp : Graph_ElementwiseGradOp<"gelu_grad", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType]> {
  let summary = "dy · gelu'(at), where `at` is the forward input";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$at,
                       DefaultValuedAttr<BoolAttr, "false">:$approximate_tanh);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "$dy `,` $at attr-dict `:` type($dx)";
}

def Graph_ScaleOp : Graph_ElementwiseOp<"scale", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Elementwise, Graph_Differentiable]> {
  let summary = "factor · x, a constant factor (a product or quotient by a constant, a negation)";
  let arguments = (ins Graph_F32Tensor:$x, F32Attr:$factor);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Graph_DropoutOp : Graph_ElementwiseOp<"dropout", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Elementwise, Graph_Differentiable]> {
  let summary = "x · mask / (1 − ratio): torch.nn.functional.dropout in training";
  let description = [{
    The mask is a counter-based draw (runtime/ops/dropout_math.h) from the run's seed, the step,
    `key` (one per model node) and each element's index in the step's whole tensor: element e
    is kept when its draw lands at or above `ratio`. Nothing is stored between forward and
    backward: the gradient is dropout of the output gradient with the same key, which redraws
    the same mask, and so does a recomputed forward. `micro_batch` (dtc-accumulate) places a
    micro-batch's tensor after the earlier ones'; after dtc-partition, `global_shape`,
    `split_axes` and `split_counts` (the mesh axes splitting each dimension) place a device's
    block, so every partitioning drops the elements one device drops. The runtime supplies the
    (seed, step) pair as the function's `rng` setting (dtc-lower-to-kernels adds it).
  }];
  let arguments = (ins Graph_F32Tensor:$x, F32Attr:$ratio, I64Attr:$key,
                       DefaultValuedAttr<I64Attr, "0">:$micro_batch,
                       OptionalAttr<DenseI64ArrayAttr>:$global_shape,
                       OptionalAttr<StrArrayAttr>:$split_axes,
                       OptionalAttr<DenseI64ArrayAttr>:$split_counts);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::FloatAttr":$ratio, "::mlir::IntegerAttr":$key), [{
      build($_builder, $_state, x, ratio, key, ::mlir::IntegerAttr(),
            ::mlir::DenseI64ArrayAttr(), ::mlir::ArrayAttr(), ::mlir::DenseI64ArrayAttr());
    }]>,
  ];
}

// NumPy-broadcasting binary ops. The result shape is the broadcast of the operand shapes.
class Graph_BinaryOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor, Graph_Differentiable], traits)> {
  let extraClassDefinition = [{
    ::dtc::sharding::OpShardingRule $cppClass::getShardingRule() {
      return ::dtc::sharding::broadcastingRule(getOperation());
    }
    void $cppClass::traceSequence(::dtc::sharding::SequenceTrace &trace) {
      ::dtc::sharding::sequenceBroadcasting(trace);
    }
  }];
  let arguments = (ins Graph_F32Tensor:$lhs, Graph_F32Tensor:$rhs);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
}
def Graph_AddOp : Graph_BinaryOp<"add", [Commutative]> { let summary = "lhs + rhs, broadcasting"; }
def Graph_SubOp : Graph_BinaryOp<"sub"> { let summary = "lhs − rhs, broadcasting"; }
def Graph_MulOp : Graph_BinaryOp<"mul", [Commutative]> { let summary = "lhs · rhs, broadcasting"; }
def Graph_DivOp : Graph_BinaryOp<"div"> { let summary = "lhs / rhs, broadcasting"; }

//===----------------------------------------------------------------------===//
// Shape
//===----------------------------------------------------------------------===//

def Graph_ReduceSumOp : Graph_Op<"reduce_sum", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Sum over `axes`; keepdims leaves them as size 1";
  let arguments = (ins Graph_F32Tensor:$x, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdims);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_BroadcastOp : Graph_Op<"broadcast", [Pure, Graph_Differentiable]> {
  let summary = "Broadcast x to the result shape (NumPy rules: right-aligned, 1s repeat)";
  let arguments = (ins Graph_F32Tensor:$x);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure, Graph_Differentiable]> {
  let summary = "Same elements in row-major order, another shape (any element type)";
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_FillOp : Graph_Op<"fill", [Pure]> {
  let summary = "A tensor with every element equal to `value`";
  let arguments = (ins F32Attr:$value);
  let results = (outs Graph_F32Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Graph_MatmulOp
    : Graph_Op<"matmul", [Pure, InferTypeOpAdaptorWithIsCompatible, Graph_Differentiable]> {
  let summary = "op(lhs) · op(rhs) on 2-D tensors, op = identity or transpose";
  let description = [{
    `nn.Linear` is `matmul(x, weight) {transpose_rhs}` followed by a bias `add`, with the
    weight in PyTorch's [out, in] layout. The result is of the operands' element type, or f32
    where they are 16-bit: the f32 sum unrounded, a weight gradient for f32 master weights
    (dtc-mixed-precision-gradients).
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Losses (mean reduction, as PyTorch's defaults)
//
// `count`, when present, is what the mean divides by instead of the op's own rows (elements):
// a partitioned loss sees a slice of the batch and divides by the global count, so the local
// losses are summands of the global mean.
//===----------------------------------------------------------------------===//

def Graph_SoftmaxCrossEntropyOp : Graph_Op<"softmax_cross_entropy",
    [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Mean over rows of −log softmax(logits)[label] (F.cross_entropy)";
  let description = [{
    With `ignore_index`, rows whose label is it add nothing (and get no gradient); the mean
    still divides by all rows (`count`), and label_fraction rescales it to the rows that count.
  }];
  let arguments = (ins Graph_F32Tensor:$logits, Graph_LabelTensor:$labels,
                       OptionalAttr<I64Attr>:$count, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Graph_F32Scalar:$loss);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` type($logits) `,` type($labels)";
  let extraClassDeclaration = Graph_SumsOverPositions;
}
def Graph_SoftmaxCrossEntropyGradOp : Graph_Op<"softmax_cross_entropy_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "dloss · (softmax(logits) − onehot(labels)) / rows";
  let arguments = (ins Graph_F32Scalar:$dloss, Graph_F32Tensor:$logits, Graph_LabelTensor:$labels,
                       OptionalAttr<I64Attr>:$count, OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Graph_F32Tensor:$dlogits);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_NllLossOp : Graph_Op<"nll_loss", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Mean over rows of −w[label]·x[label] (F.nll_loss on log-probabilities x [rows, C])";
  let description = [{
    With `ignore_index`, rows whose label is it add nothing, as softmax_cross_entropy's. The
    class weights `weight` [C] (1 when absent) scale each row's term; the mean still divides
    by the rows (`count`), and label_fraction with the same weights is the weighted mean's
    divisor. With `per_row`, the result is each row's −w[label]·x[label] ([rows], 0 on ignored
    rows): F.nll_loss's reduction='none'.
  }];
  let arguments = (ins Graph_F32Tensor:$x, Graph_LabelTensor:$labels,
                       Optional<Graph_F32Tensor>:$weight,
                       OptionalAttr<I64Attr>:$count, OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<BoolAttr, "false">:$per_row);
  let results = (outs Graph_F32Tensor:$loss);
  let assemblyFormat = [{
    $x `,` $labels (`,` $weight^)? attr-dict `:` type($x) `,` type($labels) (`,` type($weight)^)?
    `->` type($loss)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = Graph_SumsOverPositions;
}
def Graph_NllLossGradOp : Graph_Op<"nll_loss_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "−dloss·w[label] / rows at each row's label, 0 elsewhere (x gives the shape)";
  let description = [{ With `per_row`, dloss holds one value per row, and nothing divides. }];
  let arguments = (ins Graph_F32Tensor:$dloss, Graph_F32Tensor:$x, Graph_LabelTensor:$labels,
                       Optional<Graph_F32Tensor>:$weight,
                       OptionalAttr<I64Attr>:$count, OptionalAttr<I64Attr>:$ignore_index,
                       DefaultValuedAttr<BoolAttr, "false">:$per_row);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_LabelFractionOp : Graph_Op<"label_fraction", [Pure, InferTypeOpAdaptor]> {
  let summary = "The fraction of labels that are not `ignore_index` (of `count`, as a loss's mean)";
  let description = [{
    A loss whose ignored rows add nothing, divided by this, is the mean over the rows that
    count (F.cross_entropy with ignore_index): a mean-count op, so a partitioned batch's
    fractions are summands of the global one, and gradient accumulation averages it over the
    step's micro-batches before the first uses it. With class weights `weight` [C], each label
    counts as its class's weight (a label that is no class counts 0): the divisor of
    F.nll_loss's weighted mean.
  }];
  let arguments = (ins Graph_LabelTensor:$labels, Optional<Graph_F32Tensor>:$weight,
                       OptionalAttr<I64Attr>:$ignore_index, OptionalAttr<I64Attr>:$count);
  let results = (outs Graph_F32Scalar:$fraction);
  let assemblyFormat = [{
    $labels (`,` $weight^)? attr-dict `:` type($labels) (`,` type($weight)^)?
  }];
  let extraClassDeclaration = Graph_SumsOverPositions;
}

def Graph_MseOp : Graph_Op<"mse", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Mean of (pred − target)² over all elements (F.mse_loss)";
  let arguments = (ins Graph_F32Tensor:$pred, Graph_F32Tensor:$target, OptionalAttr<I64Attr>:$count);
  let results = (outs Graph_F32Scalar:$loss);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = Graph_SumsOverPositions;
}
def Graph_MseGradOp : Graph_Op<"mse_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "dloss · 2(pred − target)/n";
  let arguments = (ins Graph_F32Scalar:$dloss, Graph_F32Tensor:$pred, Graph_F32Tensor:$target,
                       OptionalAttr<I64Attr>:$count);
  let results = (outs Graph_F32Tensor:$dpred);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Optimizer updates (torch.optim semantics). Each result may reuse its operand's storage.
//===----------------------------------------------------------------------===//

// Optimizer updates are element-wise over a parameter and its state (step and rate are scalars).
def Graph_SgdUpdateOp : Graph_ElementwiseGradOp<"sgd_update", [Pure, InferTypeOpAdaptor,
    Graph_OptimizerUpdate]> {
  let summary = "torch.optim.SGD on one parameter";
  let description = [{
    g = grad + weight_decay·param; buf' = momentum·buf + g; param' = param − lr·buf'.
    With momentum 0, buf' = buf and param' = param − lr·g. The learning rate is an operand (a
    value of the step, so that one plan follows a schedule).
  }];
  let arguments = (ins Graph_F32Tensor:$param, Graph_F32Tensor:$grad, Graph_F32Tensor:$buf,
                       Graph_F32Scalar:$lr, F32Attr:$momentum, F32Attr:$weight_decay);
  let results = (outs Graph_F32Tensor:$new_param, Graph_F32Tensor:$new_buf);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Graph_AdamwUpdateOp : Graph_ElementwiseGradOp<"adamw_update", [Pure, InferTypeOpAdaptor,
    Graph_OptimizerUpdate]> {
  let summary = "torch.optim.AdamW on one parameter";
  let description = [{
    `step` is the 1-based step count of this update. param *= 1 − lr·wd; m' = β1 m + (1−β1) g;
    v' = β2 v + (1−β2) g²; param' = param − lr/(1−β1^t) · m' / (sqrt(v')/sqrt(1−β2^t) + eps).
    The learning rate is an operand, as for sgd_update.
  }];
  let arguments = (ins Graph_F32Tensor:$param, Graph_F32Tensor:$grad, Graph_F32Tensor:$exp_avg,
                       Graph_F32Tensor:$exp_avg_sq, Graph_F32Scalar:$step, Graph_F32Scalar:$lr,
                       F32Attr:$beta1, F32Attr:$beta2, F32Attr:$eps,
                       F32Attr:$weight_decay);
  let results = (outs Graph_F32Tensor:$new_param, Graph_F32Tensor:$new_exp_avg,
                      Graph_F32Tensor:$new_exp_avg_sq);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Dynamic loss scaling (fp16), as torch.cuda.amp.GradScaler
//===----------------------------------------------------------------------===//

def Graph_NonfiniteCountOp : Graph_Op<"nonfinite_count", [Pure]> {
  let summary = "How many elements of x are inf or NaN (as f32)";
  let arguments = (ins Graph_F32Tensor:$x);
  let results = (outs Graph_F32Scalar:$count);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($count)";
}

def Graph_LossScaleStepOp : Graph_Op<"loss_scale_step", [Pure]> {
  let summary = "GradScaler's step: keep or skip the update, and the next loss scale";
  let description = [{
    With `nonfinite` > 0 (some gradient overflowed): keep = 0, the scale is multiplied by
    `backoff_factor` and the run of good steps restarts. Otherwise keep = 1 and after
    `growth_interval` good steps in a row the scale is multiplied by `growth_factor`.
    `inv_scale` = 1/scale unscales this step's gradients.
  }];
  let arguments = (ins Graph_F32Scalar:$scale, Graph_F32Scalar:$good_steps,
                       Graph_F32Scalar:$nonfinite, I64Attr:$growth_interval,
                       F32Attr:$growth_factor, F32Attr:$backoff_factor);
  let results = (outs Graph_F32Scalar:$keep, Graph_F32Scalar:$inv_scale,
                      Graph_F32Scalar:$new_scale, Graph_F32Scalar:$new_good_steps);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Gradient-norm clipping, as torch.nn.utils.clip_grad_norm_
//===----------------------------------------------------------------------===//

def Graph_SumSquaresOp : Graph_Op<"sum_squares", [Pure]> {
  let summary = "The sum of x's squared elements (accumulated in f64, returned as f32)";
  let arguments = (ins Graph_F32Tensor:$x);
  let results = (outs Graph_F32Scalar:$sum);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($sum)";
}

def Graph_ClipCoefficientOp : Graph_Op<"clip_coefficient", [Pure]> {
  let summary = "The global gradient norm and clip_grad_norm_'s coefficient";
  let description = [{
    norm = sqrt(sum_squares); coef = min(1, max_norm / (norm + 1e-6)) in f32, as
    torch.nn.utils.clip_grad_norm_ computes it. With max_norm = 0 the norm is only reported and
    coef = 1.
  }];
  let arguments = (ins Graph_F32Scalar:$sum_squares, F32Attr:$max_norm);
  let results = (outs Graph_F32Scalar:$norm, Graph_F32Scalar:$coef);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_SelectOp : Graph_Op<"select", [Pure, AllTypesMatch<["on_true", "on_false", "y"]>]> {
  let summary = "on_true where the scalar `pred` is non-zero, else on_false";
  let description = [{ A skipped fp16 step keeps the parameters and optimizer state as they were. }];
  let arguments = (ins Graph_F32Scalar:$pred, Graph_F32Tensor:$on_true, Graph_F32Tensor:$on_false);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$pred `,` $on_true `,` $on_false attr-dict `:` type($pred) `,` type($y)";
}

include "GraphTransformerOps.td"
include "GraphNormOps.td"
include "GraphFp8Ops.td"
include "GraphConvOps.td"
include "GraphLinearOps.td"
include "GraphVocabParallelOps.td"
include "GraphMoeOps.td"

#endif // DTC_GRAPH_OPS_TD
