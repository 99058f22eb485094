// FP8 training's ops (runtime/exec/fp8_contracts.h has their exact arithmetic): per-tensor
// quantization and the scaled GEMM. dtc-fp8-linears writes them after autodiff, so they have no
// gradient of their own. Included by GraphOps.td.

def Graph_Fp8Tensor : RankedTensorOf<[F8E4M3FN, F8E5M2]>;

def Graph_Fp8AmaxOp : Graph_Op<"fp8_amax", [Pure]> {
  let summary = "max |x| over the whole tensor, one float32: the scale's input";
  let description = [{
    Apart from the quantization so that the ranks holding pieces of x agree on one maximum (the
    partitioner reduces it by an all-reduce MAX where x is split) before any of them quantizes.
    With `load_bf16`, x is float32 and each element is rounded to bfloat16 as it is loaded (a
    narrowing cast folded in: the same values, without the 16-bit copy).
  }];
  let arguments = (ins Graph_FloatTensor:$x, DefaultValuedAttr<BoolAttr, "false">:$load_bf16);
  let results = (outs Graph_F32Tensor:$amax);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($amax)";
  let hasVerifier = 1;
}

def Graph_Fp8QuantizeOp : Graph_Op<"fp8_quantize", [Pure]> {
  let summary = "Per-tensor dynamic FP8 quantization (torchao's tensorwise scaling)";
  let description = [{
    q = x · scale rounded to q's format (saturating), scale = fmax / max(amax, 1e-12), amax the
    whole tensor's (graph.fp8_amax); scale_inv = 1 / scale, one float32. With a third result,
    also x's transpose so quantized: x [d0, ..., dn-2, C] gives q_t [C, d0, ..., dn-2].
    `load_bf16` as graph.fp8_amax's.
  }];
  let arguments = (ins Graph_FloatTensor:$x, Graph_F32Tensor:$amax,
                       DefaultValuedAttr<BoolAttr, "false">:$load_bf16);
  let results = (outs Graph_Fp8Tensor:$q, Graph_F32Tensor:$scale_inv,
                      Variadic<Graph_Fp8Tensor>:$q_t);
  let assemblyFormat = "$x `,` $amax attr-dict `:` type($x) `,` type($amax) `->` type(results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // q_t's shape for x's: [d0, ..., dn-2, C] gives [C, d0, ..., dn-2] (both quantizations').
    static llvm::SmallVector<int64_t> transposedShape(llvm::ArrayRef<int64_t> x);
  }];
}

def Graph_Fp8QuantizeRecordedOp : Graph_Op<"fp8_quantize_recorded", [Pure]> {
  let summary = "FP8 quantization on a given amax that records x's own (delayed scaling)";
  let description = [{
    graph.fp8_quantize on `amax` (a history's, graph.fp8_history_amax), with x's own amax as
    `seen`, computed in the same pass over x: Transformer Engine's delayed scaling, where the
    scale comes from earlier steps and no pass over x precedes the cast.
  }];
  let arguments = (ins Graph_FloatTensor:$x, Graph_F32Tensor:$amax,
                       DefaultValuedAttr<BoolAttr, "false">:$load_bf16);
  let results = (outs Graph_Fp8Tensor:$q, Graph_F32Tensor:$scale_inv, Graph_F32Tensor:$seen,
                      Variadic<Graph_Fp8Tensor>:$q_t);
  let assemblyFormat = "$x `,` $amax attr-dict `:` type($x) `,` type($amax) `->` type(results)";
  let hasVerifier = 1;
}

def Graph_Fp8HistoryAmaxOp : Graph_Op<"fp8_history_amax", [Pure]> {
  let summary = "The amax a delayed scale uses: the largest of an amax history";
  let description = [{
    amax = max(history) where it is above 0; before any step has recorded one, the format's
    largest value (`fmax`), so that the first step's scale is 1, as Transformer Engine's is.
  }];
  let arguments = (ins Graph_F32Tensor:$history, F32Attr:$fmax);
  let results = (outs Graph_F32Tensor:$amax);
  let assemblyFormat = "$history attr-dict `:` type($history) `->` type($amax)";
  let hasVerifier = 1;
}

def Graph_Fp8HistoryPushOp : Graph_Op<"fp8_history_push", [Pure]> {
  let summary = "An amax history with this step's amax first";
  let description = [{
    new_history = [max(seen...), history[0], ..., history[H-2]]: the step's amax (the largest
    over the quantizations that recorded one, a step's micro-batches) enters, the oldest leaves.
  }];
  let arguments = (ins Graph_F32Tensor:$history, Variadic<Graph_F32Tensor>:$seen);
  let results = (outs Graph_F32Tensor:$new_history);
  let assemblyFormat = "$history `,` $seen attr-dict `:` type(operands) `->` type($new_history)";
  let hasVerifier = 1;
}

def Graph_Fp8GemmOp : Graph_Op<"fp8_gemm", [Pure]> {
  let summary = "out [M..., N...] = (a [M..., K...] · b [N..., K...]ᵀ) · a_scale_inv · b_scale_inv";
  let description = [{
    The products of two FP8 operands summed in float32 over their last `contract_dims`
    dimensions, then scaled; out float32 or 16-bit (rounded once). Both operands K-major, as FP8
    tensor cores read them; not both e5m2. Several contracted dimensions: a weight gradient sums
    over a batch's and a sequence's rows, each of which a mesh may split.
  }];
  let arguments = (ins Graph_Fp8Tensor:$a, Graph_Fp8Tensor:$b, Graph_F32Tensor:$a_scale_inv,
                       Graph_F32Tensor:$b_scale_inv,
                       DefaultValuedAttr<I64Attr, "1">:$contract_dims);
  let results = (outs Graph_FloatTensor:$out);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}
