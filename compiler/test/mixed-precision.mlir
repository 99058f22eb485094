// RUN: dtc-opt %s --dtc-mixed-precision="precision=bf16" | FileCheck %s
// RUN: dtc-opt %s --dtc-mixed-precision="precision=bf16" --dtc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: not dtc-opt %s --dtc-mixed-precision="precision=int8" 2>&1 | FileCheck %s --check-prefix=BAD

// The matmul takes bf16 copies of its operands (the f32 weight stays the master copy) and its
// bf16 result is cast back to f32 for the loss.
// CHECK: module attributes {graph.precision = "bf16"}
// CHECK: %[[X:.*]] = graph.cast %arg1 : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK: %[[W:.*]] = graph.cast %arg0 : tensor<3x4xf32> -> tensor<3x4xbf16>
// CHECK: %[[Y:.*]] = graph.matmul %[[X]], %[[W]] {transpose_rhs = true} : tensor<2x4xbf16>, tensor<3x4xbf16> -> tensor<2x3xbf16>
// CHECK: %[[F:.*]] = graph.cast %[[Y]] : tensor<2x3xbf16> -> tensor<2x3xf32>
// CHECK: graph.softmax_cross_entropy %[[F]], %arg2

// Backward: the loss gradient is cast to bf16 for the weight-gradient product, whose bf16
// result is cast to f32 (the gradient of the weight's cast).
// GRAD-LABEL: func.func @grad
// GRAD: %[[DY:.*]] = graph.softmax_cross_entropy_grad
// GRAD: %[[DYL:.*]] = graph.cast %[[DY]] : tensor<2x3xf32> -> tensor<2x3xbf16>
// GRAD: %[[DW:.*]] = graph.matmul %[[DYL]], %{{.*}} {transpose_lhs = true} : tensor<2x3xbf16>, tensor<2x4xbf16> -> tensor<3x4xbf16>
// GRAD: %[[G:.*]] = graph.cast %[[DW]] : tensor<3x4xbf16> -> tensor<3x4xf32>
// GRAD: return %{{.*}}, %[[G]]
// BAD: unknown precision 'int8' (expected fp32, bf16 or fp16)
func.func @forward(%w: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable},
                   %x: tensor<2x4xf32> {graph.data = "input"},
                   %y: tensor<2xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = graph.softmax_cross_entropy %0, %y : tensor<2x3xf32>, tensor<2xi64>
  return %1 : tensor<f32>
}
