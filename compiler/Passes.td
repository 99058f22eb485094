#ifndef DTC_COMPILER_PASSES_TD
#define DTC_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"dtc-autodiff", "mlir::ModuleOp"> {
  let summary = "Derive @grad (loss and parameter gradients) from @forward";
  let description = [{
    Reverse-mode differentiation through each op's GradientOpInterface. Only ops on a path
    from a trainable parameter to the loss are differentiated; gradient contributions of a
    value used several times are summed.

    Before:
    ```mlir
    func.func @forward(%w: tensor<4x3xf32> {graph.param = "w", graph.trainable},
                       %x: tensor<2x3xf32> {graph.data = "x"}, ...) -> (tensor<f32> {graph.output = "loss"})
    ```
    After, in addition:
    ```mlir
    func.func @grad(<same arguments>) -> (tensor<f32> {graph.output = "loss"},
                                          tensor<4x3xf32> {graph.grad_of = "w"})
    ```
  }];
  let dependentDialects = ["::dtc::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def Optimizer : Pass<"dtc-optimizer", "mlir::ModuleOp"> {
  let summary = "Build @train_step: @grad followed by the optimizer update";
  let description = [{
    Moves @grad into @train_step (no runtime calls @grad; `keep-grad` keeps a copy) and
    appends one update op per trainable parameter, with torch.optim semantics. Optimizer state
    becomes arguments (graph.state = "<param>.<slot>") and, updated, results (graph.updates =
    name of the parameter or state tensor). The learning rate is a scalar argument the runtime
    sets before every step (graph.hyper = "lr"), following the schedule recorded on the module
    (graph.lr_schedule):

    ```mlir
    func.func @train_step(%w {graph.param = "w"}, %b {graph.state = "w.momentum_buffer"}, %x ...,
                          %lr {graph.hyper = "lr"})
        -> (loss {graph.output = "loss"}, w' {graph.updates = "w"}, b' {graph.updates = "w.momentum_buffer"})
    ```

    Parameters matching a `no-decay` glob update without weight decay (their argument's
    graph.weight_decay says which decay each applies).
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"", "sgd or adamw">,
    Option<"keepGrad", "keep-grad", "bool", "false",
           "keep @grad beside @train_step (for gradient checks that run it)">,
    Option<"lr", "lr", "double", "0.001", "learning rate (the schedule's peak)">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"weightDecay", "weight-decay", "double", "-1.0",
           "weight decay (default: 0 for SGD, 0.01 for AdamW, as torch.optim)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW β1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW β2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW ε">,
    ListOption<"noDecay", "no-decay", "std::string",
               "globs over parameter names whose updates apply no weight decay">,
    Option<"lrSchedule", "lr-schedule", "std::string", "\"constant\"",
           "constant, cosine (warmup, cosine decay to min-lr) or linear (warmup, linear decay to 0)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0", "updates of linear warmup">,
    Option<"decaySteps", "decay-steps", "int64_t", "0", "the update at which the decay ends">,
    Option<"minLr", "min-lr", "double", "0.0", "cosine: the learning rate after the decay">,
  ];
  let dependentDialects = ["::dtc::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def EvalFunction : Pass<"dtc-eval-function", "mlir::ModuleOp"> {
  let summary = "Turn @forward into @eval: inference-mode ops, no buffer updates";
  let description = [{
    Run after dtc-autodiff has cloned @forward. Renames it @eval, replaces training-mode ops by
    their inference form (batch_norm_train -> batch_norm_eval on the running statistics,
    dropout -> the identity) and drops the buffer updates from its results, as `model.eval()` in PyTorch.
  }];
}

def LowerToKernels : Pass<"dtc-lower-to-kernels", "mlir::ModuleOp"> {
  let summary = "Turn every op of the device programs into the runtime kernel that runs it";
  let description = [{
    The boundary between the graph level (model ops, with gradient and sharding rules) and the
    plan level: each graph or dist op becomes a `plan.kernel` call of its kernel in the registry
    (runtime/ops/kernels.def), its attributes the kernel's parameters (verified against the
    kernel's declaration), its marks (`dist.stage`, `dist.micro_batch`, ...) kept. An op no
    kernel runs is an error naming it. Memory planning and the plan writer work on this level.

    ```mlir
    %1 = graph.gelu %0 {approximate_tanh = true} : tensor<4x8xf32>
    // becomes
    %1 = plan.kernel "gelu"(%0) {approximate_tanh = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    ```

    With `epilogues`, the GEMM epilogues are fused on the way (lowering/EpilogueFusion.h): the
    bias add, a tanh GELU after it, and a tanh GELU gradient after an input-gradient GEMM join
    the linear layer's GEMM as one `linear_bias`, `linear_bias_gelu` or
    `linear_grad_input_gelu` call, as cuBLASLt's epilogues run them (the CUDA default).

    With `epilogues`, a cross-entropy loss and its gradient reading the same logits become one
    `softmax_cross_entropy_with_grad` (lowering/LossFusion.h) on the logits as the LM head
    stored them (16-bit under mixed precision), its gradient written over them; the residual
    stream's adds join the LayerNorms and RMSNorms beside them, `add_layer_norm` and
    `add_rms_norm` forward, `layer_norm_grad_add` and `rms_norm_grad_add` backward
    (lowering/ResidualNormFusion.h).

    With `packed-attention`, fused attention between the layout ops that split the fused
    q/k/v projection into heads and merge them again becomes `causal_attention_qkv` and its
    gradient `causal_attention_qkv_grad` on the projection itself (lowering/PackedAttention.h):
    no split, transposes or concat are left, and cuDNN reads q, k and v in place. Attention on
    three projections (Llama's q, k and v, grouped heads included) becomes the same kernels'
    three-operand form, rotary embeddings between a projection and its transpose applied on the
    projection's rows (`seq_major`).

    With `multi-tensor`, the AdamW updates of one parameter group become one
    `multi_tensor_adamw` call, and the casts of parameters to one type one `multi_tensor_cast`
    (lowering/MultiTensorFusion.h), as PyTorch's fused AdamW: a few launches for the whole model
    instead of one per tensor (the CUDA default).

    A function with dropout gets one more argument, `rng` (tensor<2xi64> {graph.hyper =
    "rng"}): the run's seed and the step, which the runtime writes before each step and every
    dropout call reads as its last operand.
  }];
  let options = [
    Option<"epilogues", "epilogues", "bool", "false",
           "fuse bias, GELU and GELU gradient into the linear layers' GEMMs">,
    Option<"absorbCasts", "absorb-casts", "bool", "true",
           "a fused y read only by a cast to its operands' 16-bit type is written in that type "
           "(as dtc-fold-casts does for LayerNorm; off with --no-fold-casts)">,
    Option<"packedAttention", "packed-attention", "bool", "true",
           "attention reads q, k, v from their projections and writes its heads merged "
           "(off with --no-fold-casts, to compare)">,
    Option<"multiTensor", "multi-tensor", "bool", "false",
           "AdamW updates and parameter casts as multi-tensor calls, not one per tensor">,
  ];
  let dependentDialects = ["::dtc::plan::PlanDialect"];
}

def PlanMemory : Pass<"dtc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign every value a byte offset: state region for parameters and optimizer state, one arena per function reused by liveness";
  let description = [{
    Parameters and optimizer state get fixed offsets in a persistent state region shared by all
    functions (module attribute `plan.state_layout`). Every other value gets an offset in its
    function's arena: values are placed best-fit in program order and their space is reused once
    their last use has run. An optimizer update writes into its parameter's own storage when
    that is the parameter's last use (no copy). Results: `plan.offsets` (and `plan.regions`) on
    each op, `plan.arg_offsets`, `plan.arena_bytes` on each function.
  }];
  let dependentDialects = ["::dtc::plan::PlanDialect"];
}

def Recompute : Pass<"dtc-recompute", "mlir::ModuleOp"> {
  let summary = "Activation recomputation: backward computes parts of the forward again";
  let description = [{
    In @grad, backward's reads of values a group of forward ops computes are served by a copy
    of the group (`graph.recomputed`; on a pipeline, in its stage's backward unit), placed
    right before the first of them, so the forward's values die in the forward. Values the
    forward reads outside the group (a layer's output: the next layer's input) are kept.
    `full`: the groups are layers — the ops whose node names share a prefix up to a numeric
    component (`transformer.h.3.…`): each layer keeps only its input. `selective` (Megatron's):
    the groups are attention's cores — the q·kᵀ batch matmul, what lies between it and the
    softmax, the softmax and a dropout of it — so the [.., T, T] scores and probabilities are
    not kept (fused attention keeps none: nothing to do). The copies compute the same bits.
    A pipeline may take one setting per stage (`full,none`: stage 0 full, stage 1 none).
    Run after dtc-autodiff, before dtc-accumulate.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none, full or selective; or one per pipeline stage, comma-separated">,
  ];
}

def Accumulate : Pass<"dtc-accumulate", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: @grad over `micro-batches` micro-batches, summed";
  let description = [{
    Rewrites @grad to take each data input once per micro-batch (argument attribute
    `graph.micro_batch` = k) and to run forward and backward on each in turn. Autodiff's seed
    becomes 1/K: the gradients are the sums over micro-batches of 1/K of each one's, and the loss
    is the mean of theirs, so a loss that is a mean over its batch's rows (dtc's fused losses, or
    one an import spells out) gives one step on the K-times-larger batch. Buffers updated by the
    forward pass (BatchNorm running statistics) thread from one micro-batch to the next, as K
    forward calls in PyTorch. Dropout in micro-batch k draws its mask for rows k·B onwards, as
    on the K-times-larger batch. Run after dtc-autodiff, before dtc-optimizer. With partitioning,
    the sums of partial gradients stay partial: one reduction per step, not per micro-batch.
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", "1", "micro-batches per step (K)">,
  ];
}

def SyncBatchNorm : Pass<"dtc-sync-batch-norm", "mlir::ModuleOp"> {
  let summary = "Cut BatchNorm at its per-channel sums, so a split batch all-reduces statistics";
  let description = [{
    batch_norm_train becomes batch_norm_sum → batch_norm_centered_squares →
    batch_norm_normalize, and batch_norm_train_grad becomes batch_norm_grad_sums →
    batch_norm_grad_input (whose sums are the weight and bias gradients). The sums are linear
    in the batch: partitioned over it, each is partial and the partitioner all-reduces C values
    where the whole op would have needed the whole batch. Same results on one device; part of
    the partitioned pipelines.
  }];
}

def UserShardings : Pass<"dtc-user-shardings", "mlir::ModuleOp"> {
  let summary = "Set the device mesh and annotate tensors from PATTERN=SPEC user shardings";
  let description = [{
    `mesh` ("dp=2,tp=2") becomes the module's `dist.mesh`. `shard` holds ';'-separated
    `PATTERN=SPEC` items: PATTERN is a glob over parameter and input names, SPEC one entry per
    dimension, separated by ',', naming the mesh axes that split it (`tp`, `dp+tp`) or `-`.
    Matching arguments of every function get the sharding as a user annotation (optimizer
    state follows its parameter); propagation completes the rest. A pattern that matches
    nothing, a spec of the wrong rank or with unknown axes, a split that does not divide, and a
    tensor two patterns shard differently are errors.

    `megatron=tp` adds Megatron's anchors for GPT-2 (nanoGPT / Hugging Face names):
    `*.attn.c_attn.weight=3xtp,-` and its bias (q, k, v split by heads), `*.mlp.c_fc.weight=tp,-`
    and its bias (column-parallel), `*.attn.c_proj.weight=-,tp` and `*.mlp.c_proj.weight=-,tp`
    (row-parallel). The heads must divide over the axis.

    `sequence-parallel=tp` constrains the input of every LayerNorm on [B, T, C] to be split
    along T over the axis (Megatron's sequence parallelism): propagation spreads it over the
    residual stream, and the partitioner turns each tensor-parallel all-reduce into a
    reduce-scatter (into the split sequence) and an all-gather (before the next
    column-parallel projection).
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"", "mesh axes, name=size[,name=size]">,
    Option<"shard", "shard", "std::string", "\"\"", "PATTERN=SPEC[;PATTERN=SPEC]">,
    Option<"megatron", "megatron", "std::string", "\"\"",
           "mesh axis for Megatron's GPT-2 splits (attention by heads, MLP by features)">,
    Option<"sequenceParallel", "sequence-parallel", "std::string", "\"\"",
           "mesh axis splitting the sequence in LayerNorm and residual regions">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def VocabParallel : Pass<"dtc-vocab-parallel", "mlir::ModuleOp"> {
  let summary = "Split the vocabulary over a mesh axis: embedding tables, LM head, cross-entropy";
  let description = [{
    Embedding tables (parameters read by graph.embedding) are split by rows over `axis` and
    softmax_cross_entropy (and its gradient) is cut into cross_entropy_row_max → _parts →
    _combine (and _parts_grad) so that the class dimension can stay split: a device never holds
    whole [rows, vocabulary] logits. The row maximum is all-reduced with MAX, the two per-row
    sums with SUM (C floats per row, not V). A tied LM head follows its table's split by
    propagation; an untied one's weight (the linear whose output the cross-entropy reads,
    through reshapes and casts) is split by rows as the tables are.
  }];
  let options = [
    Option<"axis", "axis", "std::string", "\"tp\"", "mesh axis that splits the vocabulary">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def DataParallel : Pass<"dtc-data-parallel", "mlir::ModuleOp"> {
  let summary = "Data-parallel strategy: annotate batch inputs split over `dp`, state replicated";
  let description = [{
    Sets the module's mesh to `#dist.mesh<dp = N>` (or adds a `dp` axis to an existing mesh)
    and annotates every function: data inputs are split over `dp` along their batch dimension,
    parameters are replicated, and so is optimizer state unless `zero` is 1 or more (ZeRO:
    each state tensor is split over `dp` along its first dimension that divides). On a mesh
    with other axes, ZeRO-1 shards the state of annotated parameters only; from stage 2 on,
    parameters nobody annotated are replicated over the other axes so that theirs shards too.
    With `replicate` R, a `dp_replicate` axis of R devices joins the mesh outside `dp`: the
    batch splits over both, ZeRO shards over `dp` alone (FSDP's HYBRID_SHARD: shard within a
    group, replicate across groups), and gradients reduce over both. Propagation
    and partitioning then make gradients partial and insert their reductions.
  }];
  let options = [
    Option<"dp", "dp", "int64_t", "1", "data-parallel devices">,
    Option<"zero", "zero", "int64_t", "0",
           "ZeRO stage 0-3 (1 and up shard optimizer state; dtc-zero does the rest of 2 and 3)">,
    Option<"replicate", "replicate", "int64_t", "0",
           "size of a dp_replicate axis: the batch splits over it too, ZeRO shards over dp only">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def ExpertParallel : Pass<"dtc-expert-parallel", "mlir::ModuleOp"> {
  let summary = "Expert parallelism: experts split over `ep`, tokens moved to them by all-to-all";
  let description = [{
    On a mesh with an `ep` axis of `ep` devices: data inputs split their batch over ep too
    (after the data axes), and each mixture-of-experts layer's buffer [E, G, C, D] is pinned by
    dist.reshard to groups on the tokens' side (dispatch's result as made, combine's input) and
    to experts (E over ep) on the experts' side; propagation then splits the experts' weights and
    their optimizer state over ep, and the partitioner turns each change of side into one
    all-to-all over ep, forward and backward. Experts' gradients are partial over the data axes
    only (each expert's tokens gathered on its device), the other parameters' over ep too.
    Errors: no ep axis of that size, a model with no mixture of experts, experts or a batch
    that do not divide.
  }];
  let options = [
    Option<"ep", "ep", "int64_t", "1", "expert-parallel devices">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def ContextParallel : Pass<"dtc-context-parallel", "mlir::ModuleOp"> {
  let summary = "Context parallelism: sequences split over `cp`, attention reaching every key";
  let description = [{
    On a mesh with a `cp` axis of `cp` devices: data inputs split their sequence dimension (the
    one after the batch dimension, of the attention's context length T) over cp and their batch
    over the data axes; propagation then splits every activation along the sequence, and
    attention's queries with them. How a query reaches the keys of the other devices is
    `attention`: `all-gather` (keys and values gathered, their gradients reduce-scattered),
    `ring` (the same, made a ring afterwards by dtc-ring-attention) or `ulysses` (made an
    exchange of heads by dtc-ulysses-attention). With
    `balance`
    the sequence is cut into 2·cp chunks and device i holds chunks i and 2·cp−1−i, so that
    causal attention costs every device the same: the data inputs carry the order
    (`dist.sequence_chunks`, which dtrun reads them in) and the attention ops the chunk count
    (`seq_chunks`), for the causal mask; position tables were read in that order by
    dtc-sequence-order. Errors: no cp axis of that size, a model without fused causal
    attention, a context length that does not split into the chunks.
  }];
  let options = [
    Option<"cp", "cp", "int64_t", "1", "context-parallel devices">,
    Option<"attention", "attention", "std::string", "\"all-gather\"", "all-gather, ring or ulysses">,
    Option<"balance", "balance", "bool", "true", "2·cp chunks, device i holding i and 2·cp−1−i">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def SequenceOrder : Pass<"dtc-sequence-order", "mlir::ModuleOp"> {
  let summary = "Load-balanced context parallelism: the step reads its sequences reordered";
  let description = [{
    Before autodiff, for dtc-context-parallel's load balancing: the sequence is cut into
    `chunks` (2·cp) and laid out chunk 0, chunk N−1, chunk 1, chunk N−2, …, so that device i
    of cp holds chunks i and N−1−i and causal attention costs every device the same. Nothing
    but position-dependent ops notices a reordered sequence: the data loader reads it so, the
    attention ops place keys by their original positions (`seq_chunks`), and this pass reads
    every position table (a learned position embedding, rotary tables; found by tracing the
    sequence from the data inputs) in that order, through a split and a concat whose gradients
    put the rows back. Errors: a context length that does not split into the chunks, an op
    that reads the sequence in order (it splits, concatenates or mixes positions, or is not
    known to keep them apart), dropout (its masks are drawn by position), a position table the
    model computes.
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", "2", "chunks of each sequence (2·cp)">,
  ];
}

def ShardingPropagation : Pass<"dtc-sharding-propagation", "mlir::ModuleOp"> {
  let summary = "Shard every value from a few annotations, through the ops' sharding rules";
  let description = [{
    Inputs: `dist.mesh` on the module; `dist.sharding` on some function arguments and results,
    `dist.reshard` ops and `dist.shardings` on ops (all user annotations). Outputs: every
    argument and result annotated, `dist.factors` (the factor sharding of the op's rule) and
    `dist.shardings` (its results' shardings, partial included) on every op.
    Conflicts: user annotations win; among equals the sharding with more axes; then the first
    operand. An axis shards one factor of an op, and never a dimension it does not divide.
  }];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def Partition : Pass<"dtc-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite to per-device local shapes and insert the collectives";
  let description = [{
    Each op computes its local part under its `dist.factors`; an operand whose sharding (as
    produced) differs from what the op needs is resharded right after it is produced by the
    steps of the reshard planner (all_reduce, reduce_scatter, all_gather, all_to_all,
    local_slice). Losses divide by the global count (`count`). A reshard the planner cannot do
    is an error naming the tensor.
  }];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def MergeCollectives : Pass<"dtc-merge-collectives", "mlir::ModuleOp"> {
  let summary = "One collective where several move the same value the same way";
  let description = [{
    Collectives with the same operands, attributes and result types in one block compute the
    same value: the later ones read the first's result and are erased. Every rank compiles the
    same program, so the ranks' sequences of collectives still match. They arise where the
    partitioner resharded distinct values that later passes made one: mixed precision's casts of
    a norm's output, one per projection reading it, folded into the norm (dtc-fold-casts), left
    a Llama block's q, k and v (and gate and up) each gathering the same sequence-parallel
    activation.
  }];
}

def RecomputeGathers : Pass<"dtc-recompute-gathers", "mlir::ModuleOp"> {
  let summary = "The backward gathers an activation again instead of keeping the gathered copy";
  let description = [{
    Runs after dtc-partition under sequence parallelism (always, as Megatron's) or where
    recomputation is on. An all-gather in the forward of a function with a backward, of an
    activation (not of a function argument: dtc-zero places parameters' gathers), whose result
    the backward reads too — under sequence parallelism, a projection's input, which its weight
    gradient reads — is issued again for the backward
    (`graph.recomputed`, on the reader's pipeline unit), so the forward keeps the shard instead
    of the gathered copy (1/t of the bytes), as Megatron's sequence parallelism does. The copy
    is placed where the backward first reads the first reader's other operands (the incoming
    gradient), so it can overlap the input gradient's contraction. The gather is exact: the
    step's results keep every bit.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"selective\"",
           "the --recompute setting, or one per pipeline stage, comma-separated: stages under "
           "full or selective gather again">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def RingAttention : Pass<"dtc-ring-attention", "mlir::ModuleOp"> {
  let summary = "Context parallelism's attention as a ring: blocks of keys and values passed "
                "along cp";
  let description = [{
    Runs after dtc-partition (and dtc-recompute-gathers) under `--cp-attention ring`. Each
    attention whose queries are split over cp (`seq_axes`) and whose keys and values are
    gathered over those axes instead attends to one block at a time: its own, then each block
    passed one place along the ring (`dist.ring_shift`, issued before the current block's
    attention so that it overlaps it), `kv_shift` telling the kernel whose block it holds, the
    partial results merged by their log-sum-exps (`graph.attention_merge`). The gradient passes
    the blocks again with the float32 sums of their key and value gradients travelling beside
    them, each device adding its queries' share; one last step brings each block's sums home,
    replacing the reduce-scatter. dq sums in float32 too. A device holds two blocks of keys and
    values rather than the whole sequence. Errors: keys and values not gathered over the query
    axes, or gradients not reduce-scattered over them.
  }];
  let dependentDialects = ["::dtc::dist::DistDialect", "::dtc::graph::GraphDialect"];
}

def UlyssesAttention : Pass<"dtc-ulysses-attention", "mlir::ModuleOp"> {
  let summary = "Context parallelism's attention by all-to-all: heads split over cp, whole "
                "sequences";
  let description = [{
    Runs after dtc-partition (and dtc-recompute-gathers) under `--cp-attention ulysses`
    (DeepSpeed-Ulysses). Each attention whose queries are split over cp (`seq_axes`) and whose
    keys and values are gathered over those axes instead exchanges q, k and v by all-to-all from
    [..., H, T/cp, D] to [..., H/cp, T, D] and attends to whole sequences (keeping
    `seq_chunks`: the load-balanced order's mask); its out and lse go back by all-to-all. The
    gradient reuses the head-split operands the forward made, exchanges the incoming gradient,
    and sends dq, dk and dv back, which replaces the reduce-scatters of dk and dv. Errors: heads
    (per tensor-parallel rank) that do not divide over cp, naming the sizes; keys and values not
    gathered over the query axes, or gradients not reduce-scattered over them.
  }];
  let dependentDialects = ["::dtc::dist::DistDialect", "::dtc::graph::GraphDialect"];
}

def Zero : Pass<"dtc-zero", "mlir::ModuleOp"> {
  let summary = "ZeRO stages 2 and 3 on the partitioned programs";
  let description = [{
    Runs after dtc-partition on a plan whose optimizer state dtc-data-parallel sharded over dp
    (ZeRO-1), where each update already reads a dp-shard of its parameter and gradient.
    Stage 2: a gradient summed over accumulated micro-batches (`graph.micro_batch_sum`) is
    reduce-scattered term by term, right after each micro-batch's backward produces it, so only
    its shard is carried between micro-batches. Stage 3 (FSDP): each trainable parameter so
    sharded is kept at rest as that shard (argument and updated result); every phase that reads
    it (the forward and the backward of each micro-batch, evaluation) gathers it again right
    before, and each gather is issued at the previous one's first use in the same pipeline
    unit, so that the gathered copy lives in one phase only and the next is fetched while the
    current one computes. Parameters with no dimension that divides over dp stay replicated.
  }];
  let options = [
    Option<"stage", "stage", "int64_t", "3", "ZeRO stage: 2 or 3">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def BucketAllReduce : Pass<"dtc-bucket-all-reduce", "mlir::ModuleOp"> {
  let summary = "Fuse all-reduces into buckets of at most `bucket-mb`, in production order";
  let description = [{
    As PyTorch DDP's gradient buckets: consecutive single all-reduces over the same axes are
    fused into one `dist.all_reduce` of several tensors, placed right after the last of them
    is produced, so a runtime can overlap each bucket with the rest of the backward pass. A
    bucket closes when it would exceed the size or delay a reduction past its first use.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", "25.0", "bucket size in MiB (PyTorch's default)">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def FuseRotary : Pass<"dtc-fuse-rotary", "mlir::ModuleOp"> {
  let summary = "Fuse rotary position embeddings, spelled out, into one rotary op";
  let description = [{
    In @forward, `add(x·cos, concat(−x₂, x₁)·sin)`, with x₁ and x₂ the two halves of x's last
    dimension (split, scaled by −1, concatenated: transformers' rotate_half) and cos and sin
    arguments nothing trains ([T, D] tables, leading dimensions of size 1 allowed), becomes
    `rotary(x, cos, sin)`: one pass over x forward and one backward instead of seven ops each
    way. Every value inside the match is read only inside it. Run before autodiff.
  }];
}

def FuseAttention : Pass<"dtc-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Fuse q·kᵀ → causal softmax → ·v into one flash-style causal_attention op";
  let description = [{
    In @forward, `batch_matmul(q, k) {transpose_rhs}` → `causal_softmax` → `batch_matmul(·, v)`
    (scores and probabilities used nowhere else, q, k, v of one shape; kᵀ may also be a
    transpose feeding only the product, and the scores may be scaled on their own first, as
    exports write them) becomes
    `causal_attention(q, k, v)`: the [T, T] scores are never stored, forward or backward (the
    backward recomputes them from q, k and the saved log-sum-exp). Grouped-query attention's
    repeat of k and v to every query head (reshape [..., Hk, 1, T, D] → broadcast
    [..., Hk, G, T, D] → reshape [..., Hk·G, T, D], transformers' repeat_kv) is taken out: the
    op reads k and v with their Hk heads, each serving G consecutive query heads, and its
    backward sums their gradients over the group — when `kv-heads-divisor` (the devices that
    split heads) divides Hk, so that every device's query heads keep their key/value heads.
    Run before autodiff.
  }];
  let options = [
    Option<"kvHeadsDivisor", "kv-heads-divisor", "int64_t", "1",
           "the devices splitting attention heads: grouped k/v heads must divide over them">,
  ];
}

def FoldCasts : Pass<"dtc-fold-casts", "mlir::ModuleOp"> {
  let summary = "Move mixed precision's casts through layout ops and cancel round trips";
  let description = [{
    Run on the device programs (after partitioning) of a bf16/fp16 plan. Between the 16-bit
    contractions, attention's head split and merge (split, reshape, transpose, concat) moved
    f32 copies: a widening cast under a layout op moves below it and a narrowing cast above a
    layout op moves above it, so the layout op moves 16-bit data, and `cast(cast(x: T → f32)
    → T)` is x. An all-gather is a layout op here: ZeRO-3 gathers each parameter's 16-bit
    shard, half the bytes of its f32 one. Ops that keep activations in 16 bits around f32 math
    (LowPrecisionStorageOpInterface: LayerNorm and RMSNorm and their gradients, SwiGLU, rotary
    embeddings and theirs) take the casts in: narrowing casts that are the only readers of such
    a result go into the op, which then writes the rounded 16-bit values itself (the lowering
    does the same for a fused linear epilogue's), and such an operand reads the 16-bit value
    under a widening cast, widening it as it loads it (the cast stays while others read it).
    FP8 quantization (precision/Fp8Folds.cpp) takes a narrowing cast to bf16 in, rounding as it
    loads (a weight's 16-bit copy goes), and moves above the all-gather of its input, on the
    shards' amaxes reduced by an all-reduce MAX: the gather moves FP8 codes (ZeRO-3 gathers
    each FP8 layer's weight in one byte an element), and a transposed copy is made from the
    gathered codes. Every rewrite is exact
    (widening is exact; rounding commutes with moving elements; the producer rounds as the cast
    did; a shard quantized with the whole tensor's amax has the whole tensor's codes): results
    are bit for bit those of the unfolded plan. A function argument (a parameter)
    cast to one type several times, once per micro-batch, is cast once and the copy shared.
  }];
}

def MixedPrecision : Pass<"dtc-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Run contractions in bf16 or f16 with f32 weights, activations and optimizer";
  let description = [{
    As `torch.autocast`: every matmul, linear, batch_matmul and causal_attention of @forward
    takes its operands cast to `precision` (bf16 or fp16) and gives its result in it, cast back
    to f32 for the ops that follow (as SDPA under autocast; attention's log-sum-exp stays f32); parameters (the master weights), optimizer state, normalisations,
    softmax and losses stay f32. Autodiff then runs the contractions' gradients in the low
    precision too (the gradient of a cast is the cast back). Kernels accumulate in f32.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"bf16\"", "bf16 or fp16">,
  ];
}

def MixedPrecisionGradients : Pass<"dtc-mixed-precision-gradients", "mlir::ModuleOp"> {
  let summary = "Mixed precision's backward: weight gradients summed into f32";
  let description = [{
    Run after dtc-autodiff under --precision bf16|fp16. The gradient of a 16-bit weight copy
    is a 16-bit product (linear_grad_weight, or matmul) cast back to the f32 master weight's
    type; found from the gradients @grad returns (through the adds that sum a tied weight's
    uses), the weight-gradient GEMM writes f32 itself instead, summed in f32 and never rounded to 16 bits (as Megatron-LM's
    gradient-accumulation fusion keeps main_grad; torch.autocast rounds the gradient of the
    bf16 weight copy, then widens it). One GEMM output of half the bytes again, and one cast
    less per weight.

    ```mlir
    %g = graph.linear_grad_weight %dy, %x : tensor<8x64xbf16>, tensor<8x16xbf16> -> tensor<64x16xbf16>
    %w = graph.cast %g : tensor<64x16xbf16> -> tensor<64x16xf32>
    // becomes
    %w = graph.linear_grad_weight %dy, %x : tensor<8x64xbf16>, tensor<8x16xbf16> -> tensor<64x16xf32>
    ```
  }];
}

def Fp8Linears : Pass<"dtc-fp8-linears", "mlir::ModuleOp"> {
  let summary = "FP8 training: the chosen linear layers' three GEMMs on FP8 operands";
  let description = [{
    Run under --precision fp8 (bf16 everywhere else, f32 master weights and state, as torchao's
    Float8 training) on the whole step (after recomputation, accumulation and the optimizer),
    once a mesh's layouts are annotated and before they propagate. Each linear layer (graph.linear, or
    graph.matmul of a 2-D input by a weight [N, K] transposed or [K, N]) whose weight's
    dimensions are multiples of 16 and whose model node no --fp8-skip glob matches becomes
    fp8_gemm on per-tensor quantized operands: the input and the weight in e4m3fn, and in the
    training step its input and weight gradients (found by the gradient rules' forms, after it, of one dy) with
    dy in e5m2. A value is quantized once per function, with its transposed copy where a GEMM
    reads it K-major. Its amax is its own op, so that a mesh splitting it reduces one maximum
    (an all-reduce MAX) before any rank quantizes; no reshape merges a batch's and a sequence's
    dimensions, so the partitioner splits the FP8 operands as it splits their sources.

    ```mlir
    %y = graph.linear %x, %w : tensor<2x8x64xbf16>, tensor<32x64xbf16> -> tensor<2x8x32xbf16>
    // becomes
    %ax = graph.fp8_amax %x : tensor<2x8x64xbf16> -> tensor<1xf32>
    %qx, %sx = graph.fp8_quantize %x, %ax : tensor<2x8x64xbf16> -> tensor<2x8x64xf8E4M3FN>, ...
    %aw = graph.fp8_amax %w : tensor<32x64xbf16> -> tensor<1xf32>
    %qw, %sw = graph.fp8_quantize %w, %aw : tensor<32x64xbf16> -> tensor<32x64xf8E4M3FN>, ...
    %y = graph.fp8_gemm %qx, %qw, %sx, %sw : (...) -> tensor<2x8x32xbf16>
    ```
    In the training step the weight gradient contracts over both of x's leading dimensions
    (`contract_dims = 2`) of the transposed copies, dy's [32, 2, 8] and x's [64, 2, 8].
  }];
  let options = [
    Option<"skip", "skip", "std::string", "\"lm_head\"",
           "comma-separated globs over model node names kept in bf16">,
    Option<"strictSkip", "strict-skip", "bool", "false",
           "every skip glob must match a linear layer (the user gave them)">,
    Option<"scaling", "scaling", "std::string", "\"dynamic\"",
           "dynamic (each tensor's own amax) or delayed (an amax history, in the training step)">,
    Option<"history", "history", "int64_t", "16", "delayed: the amax history's length">,
  ];
}

def LossScaling : Pass<"dtc-loss-scaling", "mlir::ModuleOp"> {
  let summary = "Dynamic loss scaling for fp16 training, as torch.cuda.amp.GradScaler";
  let description = [{
    Run after dtc-optimizer. @train_step gains two state tensors, `loss_scale` (initially
    `init-scale`) and `loss_scale.good_steps`. The backward pass starts from the scale instead
    of 1 (so small fp16 gradients do not underflow); the gradients are counted for inf/NaN and
    multiplied by 1/scale before the optimizer; when any overflowed, every optimizer update of
    the step is discarded (parameters, optimizer state and AdamW's step count keep their
    values: `graph.select`) and the scale is multiplied by `backoff`; after `interval` good
    steps in a row it is multiplied by `growth`.
  }];
  let options = [
    Option<"initScale", "init-scale", "double", "65536.0", "initial scale (GradScaler's 2^16)">,
    Option<"growth", "growth", "double", "2.0", "growth factor">,
    Option<"backoff", "backoff", "double", "0.5", "backoff factor">,
    Option<"interval", "interval", "int64_t", "2000", "good steps before growing">,
  ];
}

def ClipGradNorm : Pass<"dtc-clip-grad-norm", "mlir::ModuleOp"> {
  let summary = "The global gradient norm in every training program, and clipping to a bound";
  let description = [{
    Runs on the programs devices execute (after partitioning and pipeline scheduling, or on the
    single-device @train_step). Before the first optimizer update it computes the L2 norm of all
    trainable parameters' gradients, as torch.nn.utils.clip_grad_norm_ does, and with
    `max-norm` > 0 multiplies every gradient by min(1, max_norm / (norm + 1e-6)).

    Each device sums the squares of the gradient pieces it holds. A gradient whose parameter is
    replicated over mesh axes where others are split is counted by the first device along them
    (`dist.count_once`), so one scalar `dist.all_reduce` over exactly the axes that split some
    gradient (and the pipeline axis: each stage holds its own parameters) gives every device
    the global sum, with each parameter counted once:

    ```mlir
    %s = graph.sum_squares %g_tp_split ...; %r = graph.sum_squares %g_replicated
    %r1 = dist.count_once %r over ["tp"]
    %t = dist.all_reduce %sum over ["tp"] : tensor<f32>
    %norm, %coef = graph.clip_coefficient %t {max_norm = 1.0}
    ```

    Updates placed before the last gradient is ready move after it. The norm is returned as a
    result tagged `graph.metric = "grad_norm"`. Under fp16 the norm is that of the unscaled
    gradients (loss scaling unscales them before the updates); a non-finite norm's step is
    skipped by loss scaling.
  }];
  let options = [
    Option<"maxNorm", "max-norm", "double", "0.0", "the bound (0: report the norm only)">,
  ];
  let dependentDialects = ["::dtc::graph::GraphDialect", "::dtc::dist::DistDialect"];
}

def PipelineStages : Pass<"dtc-pipeline-stages", "mlir::ModuleOp"> {
  let summary = "Cut @forward into pipeline stages balanced by the cost model (or at given nodes)";
  let description = [{
    Assigns every op of @forward, and every parameter, a pipeline stage (`dist.stage`): the
    model is cut into `stages` × `virtual-stages` contiguous chunks (chunk c runs on device
    c mod `stages`). Cuts fall between model nodes where a single tensor crosses (a layer
    boundary: the residual stream between transformer blocks, the activation between linear
    layers) and balance the chunks' estimated forward+backward time (pipeline_parallel/CostModel.h);
    each chunk holds at least one layer with parameters. `cuts` (comma-separated node names,
    each starting a new chunk) overrides the choice. A parameter lives on the chunk that first
    uses it (a tied LM head reads its embedding from there). The schedule options are recorded
    on the module (`dist.pipeline`) for dtc-pipeline-schedule. Autodiff gives gradient ops their
    forward op's stage.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1", "devices along the pipeline axis">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1", "model chunks per device">,
    Option<"microBatches", "micro-batches", "int64_t", "1", "micro-batches per step">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved, zb-h1 or zb-v">,
    Option<"cuts", "cuts", "std::string", "\"\"", "node names that start chunks 1, 2, ...">,
  ];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

def PipelineSchedule : Pass<"dtc-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Split @train_step and @eval into one program per pipeline stage, in schedule order";
  let description = [{
    Run after partitioning. Every op of @train_step and @eval goes to the device of its stage
    (`dist.stage`; ops without one follow their operands; ops on replicated inputs only, such
    as AdamW's step counter, are repeated on every device that needs them). A value used on
    another device is sent once, right after it is produced (`dist.send`, never blocking), and
    received right before its first use there (`dist.recv`); tags make each transfer between
    two devices distinct. Each device's program runs its units — forward or backward of one
    micro-batch through one chunk — in the order of the schedule (GPipe, 1F1B, interleaved
    1F1B); other ops run as soon as their operands are ready. The loss and outputs are sent to
    stage 0, which returns them. The result is checked for deadlock by simulating the programs
    with the cost model. @grad is dropped (pipelined plans train and evaluate).
  }];
  let dependentDialects = ["::dtc::dist::DistDialect"];
}

#endif // DTC_COMPILER_PASSES_TD
