#ifndef DTC_PLAN_OPS_TD
#define DTC_PLAN_OPS_TD

include "PlanDialect.td"

def Plan_KernelOp : Op<Plan_Dialect, "kernel"> {
  let summary = "One call of a runtime kernel: a step of the plan";
  let description = [{
    The level the plan file is written from: `dtc-lower-to-kernels` turns every op of the
    device programs into the runtime kernel that runs it (runtime/ops/kernels.def), with the
    kernel's own parameters in `params` and the compiler's marks (stage, micro-batch, memory
    placement) beside them. The verifier holds each call to its kernel's declaration: the
    kernel exists, and every parameter is one it reads, of the kind it reads.

    ```mlir
    %y = plan.kernel "gelu"(%x) {approximate_tanh = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$operands, StrAttr:$kernel, DictionaryAttr:$params);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $kernel `(` $operands `)` $params attr-dict `:` functional-type($operands, $results)
  }];
  let hasVerifier = 1;
}

#endif // DTC_PLAN_OPS_TD
