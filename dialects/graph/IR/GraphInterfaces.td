#ifndef DTC_GRAPH_INTERFACES_TD
#define DTC_GRAPH_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Graph_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::dtc::graph";
  let description = [{
    Reverse-mode rule of an op: given the gradients of the loss with respect to the op's
    results, build the gradients with respect to its operands. The autodiff pass uses only
    this interface, so adding a differentiable op never touches the pass.
  }];
  let methods = [
    InterfaceMethod<
      [{Builds the operand gradients at the builder's insertion point. `resultGrads` has one
        value per result; a null value means the loss does not depend on that result. Returns
        one value per operand: null for an operand that is not differentiable (e.g. class
        labels). Fails (after emitting an error) if the rule cannot be built.}],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads)>,
  ];
}

#endif // DTC_GRAPH_INTERFACES_TD
