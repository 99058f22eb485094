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

def Graph_LowPrecisionStorageOpInterface : OpInterface<"LowPrecisionStorageOpInterface"> {
  let cppNamespace = "::dtc::graph";
  let description = [{
    An op whose math is float32 and which may keep some of its float operands and results in
    bf16/f16 (mixed precision's storage): such an operand is widened as it is loaded, which is
    exact, and such a result rounded once as it is stored, to nearest even, which is the
    rounding a cast to that type does. dtc-fold-casts folds a widening cast into an operand and
    narrowing casts into a result the op names here, so a 16-bit value moves between kernels as
    16 bits with every bit of the computation unchanged. Every backend's kernel of the op takes
    each such operand and result in float32 or in the step's one 16-bit type.
  }];
  let methods = [
    InterfaceMethod<"Whether operand `index` may be stored in 16 bits (widened on load).",
      "bool", "widensOperand", (ins "unsigned":$index)>,
    InterfaceMethod<"Whether result `index` may be stored in 16 bits (rounded on store).",
      "bool", "roundsResult", (ins "unsigned":$index)>,
  ];
}

#endif // DTC_GRAPH_INTERFACES_TD
