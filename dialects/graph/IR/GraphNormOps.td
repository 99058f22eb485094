// Normalisations over the last dimension (LayerNorm, RMSNorm) and their gradients: each also
// returns the row statistics its backward reads. Included by GraphOps.td.

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure, InferTypeOpAdaptorWithIsCompatible,
    Graph_Differentiable, Graph_LowPrecisionStorage, Graph_NormalizesFeatures]> {
  let summary = "LayerNorm over the last dimension (nn.LayerNorm); also returns mean and rstd";
  let description = [{
    y may be bf16/f16 (the f32 result rounded: dtc-fold-casts folds the cast that fed a
    16-bit contraction into it); mean and rstd are f32.
  }];
  let arguments = (ins Graph_F32Tensor:$x, Graph_F32Tensor:$weight, Graph_F32Tensor:$bias,
                       F32Attr:$eps);
  let results = (outs Graph_FloatTensor:$y, Graph_F32Tensor:$mean, Graph_F32Tensor:$rstd);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    // Why x, weight and bias cannot make a layer_norm, or nullopt: what inference and importers refuse (an importer
    // must refuse bad shapes before building; a failing inference in a builder is fatal).
    static std::optional<std::string> checkShapes(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> weight,
                                                   llvm::ArrayRef<int64_t> bias);
  }];
}
def Graph_LayerNormGradOp : Graph_Op<"layer_norm_grad", [Pure, InferTypeOpAdaptor,
    Graph_LowPrecisionStorage]> {
  let summary = "Gradients of layer_norm with respect to x, weight and bias";
  let description = [{
    dy may be bf16/f16 (a 16-bit contraction's input gradient, dtc-fold-casts): it is read
    widened, which is exact.
  }];
  let arguments = (ins Graph_FloatTensor:$dy, Graph_F32Tensor:$x, Graph_F32Tensor:$weight,
                       Graph_F32Tensor:$mean, Graph_F32Tensor:$rstd);
  let results = (outs Graph_F32Tensor:$dx, Graph_F32Tensor:$dweight, Graph_F32Tensor:$dbias);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_RmsNormOp : Graph_Op<"rms_norm", [Pure, InferTypeOpAdaptorWithIsCompatible,
    Graph_Differentiable, Graph_LowPrecisionStorage, Graph_NormalizesFeatures]> {
  let summary = "RMSNorm over the last dimension (LlamaRMSNorm); also returns rstd";
  let description = [{
    y = x · rstd · weight with rstd = 1 / sqrt(mean(x²) + eps) per row, as transformers'
    LlamaRMSNorm computes it in float32. x and y may be bf16/f16 (the math in f32,
    dtc-fold-casts); rstd is f32.
  }];
  let arguments = (ins Graph_FloatTensor:$x, Graph_F32Tensor:$weight, F32Attr:$eps);
  let results = (outs Graph_FloatTensor:$y, Graph_F32Tensor:$rstd);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    // Why x and weight cannot make an rms_norm, or nullopt: what inference and importers refuse (an importer
    // must refuse bad shapes before building; a failing inference in a builder is fatal).
    static std::optional<std::string> checkShapes(llvm::ArrayRef<int64_t> x, llvm::ArrayRef<int64_t> weight);
  }];
}
def Graph_RmsNormGradOp : Graph_Op<"rms_norm_grad", [Pure, InferTypeOpAdaptorWithIsCompatible,
    Graph_LowPrecisionStorage]> {
  let summary = "Gradients of rms_norm with respect to x and weight";
  let description = [{
    dy, x and dx may be bf16/f16 (the math in f32, dtc-fold-casts); dweight is f32.
  }];
  let arguments = (ins Graph_FloatTensor:$dy, Graph_FloatTensor:$x, Graph_F32Tensor:$weight,
                       Graph_F32Tensor:$rstd);
  let results = (outs Graph_FloatTensor:$dx, Graph_F32Tensor:$dweight);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
