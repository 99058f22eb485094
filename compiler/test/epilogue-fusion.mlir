// RUN: dtc-opt %s --dtc-lower-to-kernels="epilogues=true" | FileCheck %s
// RUN: dtc-opt %s --dtc-lower-to-kernels="epilogues=true absorb-casts=false" | FileCheck %s --check-prefix=KEEP

// f32: linear → bias add → tanh GELU is one linear_bias_gelu call; the pre-activation it also
// gives feeds the backward's GELU gradient, which joins the next layer's input-gradient GEMM.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[F:.*]]:2 = plan.kernel "linear_bias_gelu"(%arg0, %arg1, %arg2) {} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
// CHECK: %[[OUT:.*]] = plan.kernel "linear_bias"(%[[F]]#0, %arg3, %arg4) {} : (tensor<4x16xf32>, tensor<2x16xf32>, tensor<2xf32>) -> tensor<4x2xf32>
// CHECK: %[[DPRE:.*]] = plan.kernel "linear_grad_input_gelu"(%arg5, %arg3, %[[F]]#1) {} : (tensor<4x2xf32>, tensor<2x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NOT: "gelu"
// CHECK-NOT: "add"
// CHECK: return %[[OUT]], %[[DPRE]]
func.func @mlp(%x: tensor<4x8xf32>, %w1: tensor<16x8xf32>, %b1: tensor<16xf32>, %w2: tensor<2x16xf32>,
               %b2: tensor<2xf32>, %dy: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x16xf32>) {
  %0 = graph.linear %x, %w1 : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %1 = graph.add %0, %b1 : tensor<4x16xf32>, tensor<16xf32>
  %2 = graph.gelu %1 {approximate_tanh = true} : tensor<4x16xf32>
  %3 = graph.linear %2, %w2 : tensor<4x16xf32>, tensor<2x16xf32> -> tensor<4x2xf32>
  %4 = graph.add %b2, %3 : tensor<2xf32>, tensor<4x2xf32>
  %5 = graph.linear_grad_input %dy, %w2 : tensor<4x2xf32>, tensor<2x16xf32> -> tensor<4x16xf32>
  %6 = graph.gelu_grad %5, %1 {approximate_tanh = true} : tensor<4x16xf32>
  return %4, %6 : tensor<4x2xf32>, tensor<4x16xf32>
}

// Mixed precision: the widening casts of the 16-bit products go into the fused calls (their
// results are f32, the products never rounded).
// CHECK-LABEL: func.func @bf16
// CHECK: %[[Y:.*]] = plan.kernel "linear_bias"(%arg0, %arg1, %arg2) {} : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK: %[[DX:.*]] = plan.kernel "linear_grad_input_gelu"(%arg3, %arg1, %arg4) {} : (tensor<4x16xbf16>, tensor<16x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: "cast"
// CHECK: return %[[Y]], %[[DX]]
func.func @bf16(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xf32>, %dy: tensor<4x16xbf16>,
                %pre: tensor<4x8xf32>) -> (tensor<4x16xf32>, tensor<4x8xf32>) {
  %0 = graph.linear %x, %w : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
  %1 = graph.cast %0 : tensor<4x16xbf16> -> tensor<4x16xf32>
  %2 = graph.add %1, %b : tensor<4x16xf32>, tensor<16xf32>
  %3 = graph.linear_grad_input %dy, %w : tensor<4x16xbf16>, tensor<16x8xbf16> -> tensor<4x8xbf16>
  %4 = graph.cast %3 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %5 = graph.gelu_grad %4, %pre {approximate_tanh = true} : tensor<4x8xf32>
  return %2, %5 : tensor<4x16xf32>, tensor<4x8xf32>
}

// A fused output read only by a narrowing cast to its operands' 16-bit type is written in that
// type (the epilogue rounds once, as the cast did); pre stays f32. On f32 operands, or with
// absorb-casts=false (--no-fold-casts), the cast stays.
// CHECK-LABEL: func.func @narrowed
// CHECK: %[[G:.*]]:2 = plan.kernel "linear_bias_gelu"(%arg0, %arg1, %arg2) {} : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>) -> (tensor<4x16xbf16>, tensor<4x16xf32>)
// CHECK: %[[B:.*]] = plan.kernel "linear_bias"(%arg3, %arg4, %arg2) {} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK: plan.kernel "cast"(%[[B]]) {} : (tensor<4x16xf32>) -> tensor<4x16xbf16>
// CHECK: return %[[G]]#0, %[[G]]#1
// KEEP-LABEL: func.func @narrowed
// KEEP: %[[G:.*]]:2 = plan.kernel "linear_bias_gelu"(%arg0, %arg1, %arg2) {} : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
// KEEP: plan.kernel "cast"(%[[G]]#0) {} : (tensor<4x16xf32>) -> tensor<4x16xbf16>
func.func @narrowed(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>, %bias: tensor<16xf32>,
                    %xf: tensor<4x8xf32>, %wf: tensor<16x8xf32>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xbf16>) {
  %0 = graph.linear %x, %w : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
  %1 = graph.cast %0 : tensor<4x16xbf16> -> tensor<4x16xf32>
  %2 = graph.add %1, %bias : tensor<4x16xf32>, tensor<16xf32>
  %3 = graph.gelu %2 {approximate_tanh = true} : tensor<4x16xf32>
  %4 = graph.cast %3 : tensor<4x16xf32> -> tensor<4x16xbf16>
  %5 = graph.linear %xf, %wf : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %6 = graph.add %5, %bias : tensor<4x16xf32>, tensor<16xf32>
  %7 = graph.cast %6 : tensor<4x16xf32> -> tensor<4x16xbf16>
  return %4, %2, %7 : tensor<4x16xbf16>, tensor<4x16xf32>, tensor<4x16xbf16>
}

// Left alone: a product used elsewhere too (its value must stay), an erf GELU (cuBLASLt's GELU
// is the tanh form), and an add of two activations (no bias).
// CHECK-LABEL: func.func @unfused
// CHECK: plan.kernel "linear"(%arg0, %arg1)
// CHECK: plan.kernel "add"
// CHECK: %[[P:.*]] = plan.kernel "linear_bias"(%arg0, %arg1, %arg2)
// CHECK: plan.kernel "gelu"(%[[P]]) {approximate_tanh = false}
// CHECK: plan.kernel "linear"(%arg0, %arg1)
// CHECK: plan.kernel "add"(%{{.*}}, %arg3) {} : (tensor<4x16xf32>, tensor<4x16xf32>)
func.func @unfused(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %r: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %0 = graph.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %1 = graph.add %0, %b : tensor<4x16xf32>, tensor<16xf32>
  %2 = graph.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %3 = graph.add %2, %b : tensor<4x16xf32>, tensor<16xf32>
  %4 = graph.gelu %3 : tensor<4x16xf32>
  %5 = graph.linear %x, %w : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %6 = graph.add %5, %r : tensor<4x16xf32>, tensor<4x16xf32>
  return %0, %1, %4, %6 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
