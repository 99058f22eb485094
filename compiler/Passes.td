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
    Clones @grad into @train_step and appends one update op per trainable parameter, with
    torch.optim semantics. Optimizer state becomes arguments (graph.state = "<param>.<slot>")
    and, updated, results (graph.updates = name of the parameter or state tensor):

    ```mlir
    func.func @train_step(%w {graph.param = "w"}, %b {graph.state = "w.momentum_buffer"}, %x ...)
        -> (loss {graph.output = "loss"}, w' {graph.updates = "w"}, b' {graph.updates = "w.momentum_buffer"})
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"", "sgd or adamw">,
    Option<"lr", "lr", "double", "0.01", "learning rate">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"weightDecay", "weight-decay", "double", "-1.0",
           "weight decay (default: 0 for SGD, 0.01 for AdamW, as torch.optim)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW β1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW β2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW ε">,
  ];
  let dependentDialects = ["::dtc::graph::GraphDialect", "::mlir::func::FuncDialect"];
}

def EvalFunction : Pass<"dtc-eval-function", "mlir::ModuleOp"> {
  let summary = "Turn @forward into @eval: inference-mode ops, no buffer updates";
  let description = [{
    Run after dtc-autodiff has cloned @forward. Renames it @eval, replaces training-mode ops by
    their inference form (batch_norm_train -> batch_norm_eval on the running statistics) and
    drops the buffer updates from its results, as `model.eval()` in PyTorch.
  }];
}

def PlanMemory : Pass<"dtc-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign every value a byte offset: state region for parameters and optimizer state, one arena per function reused by liveness";
  let description = [{
    Parameters and optimizer state get fixed offsets in a persistent state region shared by all
    functions (module attribute `plan.state_layout`). Every other value gets an offset in its
    function's arena: values are placed best-fit in program order and their space is reused once
    their last use has run. An optimizer update writes into its parameter's own storage when
    that is the parameter's last use (no copy). Results: `plan.offset` (and `plan.region`) on
    each op, `plan.arg_offsets`, `plan.arena_bytes` on each function.
  }];
}

#endif // DTC_COMPILER_PASSES_TD
