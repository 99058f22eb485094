// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s
// RUN: dtc-opt %s --dtc-autodiff --split-input-file --verify-diagnostics -o /dev/null 2>&1 | FileCheck %s --check-prefix=NONE --allow-empty

// A Linear -> ReLU -> cross-entropy graph: @grad gets the chain rule in reverse order, the
// bias gradient as a sum over the batch, and the weight gradient as one transposed matmul.
// CHECK-LABEL: func.func @grad
// CHECK-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<3x4xf32> {graph.grad_of = "fc.weight"}, tensor<3xf32> {graph.grad_of = "fc.bias"})
// CHECK: %[[MM:.*]] = graph.matmul %arg2, %arg0 {transpose_rhs = true}
// CHECK: %[[PRE:.*]] = graph.add %[[MM]], %arg1
// CHECK: %[[ACT:.*]] = graph.relu %[[PRE]]
// CHECK: %[[LOSS:.*]] = graph.softmax_cross_entropy %[[ACT]], %arg3
// CHECK: %[[ONE:.*]] = graph.fill {graph.loss_seed, value = 1.000000e+00 : f32} : tensor<f32>
// CHECK: %[[DACT:.*]] = graph.softmax_cross_entropy_grad %[[ONE]], %[[ACT]], %arg3
// CHECK: %[[DPRE:.*]] = graph.relu_grad %[[DACT]], %[[PRE]]
// CHECK: %[[DB:.*]] = graph.reduce_sum %[[DPRE]] {axes = array<i64: 0>} : tensor<2x3xf32> -> tensor<3xf32>
// CHECK: %[[DW:.*]] = graph.matmul %[[DPRE]], %arg2 {transpose_lhs = true} : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
// No gradient is built for the data input (dead code is removed).
// CHECK-NOT: graph.matmul
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]
func.func @forward(%w: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable},
                   %b: tensor<3xf32> {graph.param = "fc.bias", graph.trainable},
                   %x: tensor<2x4xf32> {graph.data = "input"},
                   %y: tensor<2xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}, tensor<2x3xf32> {graph.output = "logits"}) {
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = graph.add %0, %b : tensor<2x3xf32>, tensor<3xf32>
  %2 = graph.relu %1 : tensor<2x3xf32>
  %3 = graph.softmax_cross_entropy %2, %y : tensor<2x3xf32>, tensor<2xi64>
  return %3, %2 : tensor<f32>, tensor<2x3xf32>
}
// NONE-NOT: error
