// Ops of a mixture-of-experts layer: routing with a capacity per expert, dispatch of tokens to
// the experts' slots and the weighted combine back, and the log-sum-exp of the router's z-loss.
// Included by GraphOps.td (one TableGen unit per dialect).
//
// Tokens come in G groups of S (a group is one sequence, so routing never depends on how the
// batch is split over devices); each expert takes at most C tokens of a group. Every shape is
// static: the dispatched tokens sit in a buffer [E, G, C, D], empty slots zero.

def Graph_MoeRouteOp : Graph_Op<"moe_route", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "Top-k experts of every token, its slot within their capacity, and its weights";
  let description = [{
    scores [G, S, E] (the router's probabilities). Each token takes the `top_k` experts of
    largest score (descending; ties to the lower index) with weights = their scores, divided by
    the k scores' sum with `normalize`. Slots are handed out per group and expert in GShard's
    priority order: every token's first choice in token order, then every second choice...; a
    choice past `capacity` gets slot −1 (dropped: the token passes on through the residual).
    `load` [G, S, E] is 1 where a token chose an expert (dropped or not): the f of Switch's
    load-balancing loss. Only `weight` carries a gradient (to the chosen scores).
  }];
  let arguments = (ins Graph_F32Tensor:$scores, I64Attr:$top_k, I64Attr:$capacity,
                       DefaultValuedAttr<BoolAttr, "false">:$normalize);
  let results = (outs Graph_LabelTensor:$expert, Graph_LabelTensor:$slot,
                      Graph_F32Tensor:$weight, Graph_F32Tensor:$load);
  let assemblyFormat = "$scores attr-dict `:` type($scores) `->` type(results)";
}
def Graph_MoeRouteGradOp : Graph_Op<"moe_route_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "The gradient of moe_route's weights with respect to the scores";
  let arguments = (ins Graph_F32Tensor:$dweight, Graph_F32Tensor:$scores,
                       Graph_LabelTensor:$expert, DefaultValuedAttr<BoolAttr, "false">:$normalize);
  let results = (outs Graph_F32Tensor:$dscores);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_MoeDispatchOp : Graph_Op<"moe_dispatch", [Pure, Graph_Differentiable]> {
  let summary = "Tokens x [G, S, D] copied to their experts' slots: buffer [E, G, C, D]";
  let description = [{
    buffer[e, g, c] = x[g, s] for each choice (e, c) of token s with c ≥ 0; zero elsewhere. E and
    C are the result's.
  }];
  let arguments = (ins Graph_F32Tensor:$x, Graph_LabelTensor:$expert, Graph_LabelTensor:$slot);
  let results = (outs Graph_F32Tensor:$buffer);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}
def Graph_MoeDispatchGradOp : Graph_Op<"moe_dispatch_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "The gradient of moe_dispatch: each token's slots summed back, [G, S, D]";
  let arguments = (ins Graph_F32Tensor:$dbuffer, Graph_LabelTensor:$expert,
                       Graph_LabelTensor:$slot);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_MoeCombineOp : Graph_Op<"moe_combine", [Pure, InferTypeOpAdaptor,
    Graph_Differentiable]> {
  let summary = "The experts' outputs [E, G, C, D] summed per token by its weights: [G, S, D]";
  let description = [{
    y[g, s] = Σ_j weight[g, s, j] · buffer[e_j, g, c_j] over the token's choices that were not
    dropped (c_j ≥ 0); a token all of whose choices were dropped gets 0.
  }];
  let arguments = (ins Graph_F32Tensor:$buffer, Graph_LabelTensor:$expert,
                       Graph_LabelTensor:$slot, Graph_F32Tensor:$weight);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
def Graph_MoeCombineGradOp : Graph_Op<"moe_combine_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of moe_combine with respect to the buffer and the weights";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$buffer, Graph_LabelTensor:$expert,
                       Graph_LabelTensor:$slot, Graph_F32Tensor:$weight);
  let results = (outs Graph_F32Tensor:$dbuffer, Graph_F32Tensor:$dweight);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Graph_LogSumExpOp : Graph_Op<"logsumexp", [Pure, InferTypeOpAdaptor, Graph_Differentiable]> {
  let summary = "log Σ exp(x) over the last dimension (torch.logsumexp(x, -1)), computed stably";
  let arguments = (ins Graph_F32Tensor:$x);
  let results = (outs Graph_F32Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($y)";
}
def Graph_LogSumExpGradOp : Graph_Op<"logsumexp_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "dy · exp(x − y): the gradient of logsumexp (dy times the softmax of x)";
  let arguments = (ins Graph_F32Tensor:$dy, Graph_F32Tensor:$x, Graph_F32Tensor:$y);
  let results = (outs Graph_F32Tensor:$dx);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}
