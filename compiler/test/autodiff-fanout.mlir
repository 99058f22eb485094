// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s

// A value used twice gets the sum of both contributions; a frozen parameter gets none; a
// trainable parameter the loss ignores gets an explicit zero gradient.
// CHECK-LABEL: func.func @grad
// CHECK-SAME: graph.grad_of = "w"
// CHECK-SAME: graph.grad_of = "unused"
// CHECK-NOT: graph.grad_of = "frozen"
// CHECK: %[[H:.*]] = graph.mul %arg0, %arg3
// CHECK: graph.mul %[[H]], %[[H]]
// CHECK: %[[A:.*]] = graph.mul %{{.*}}, %[[H]]
// CHECK: %[[B:.*]] = graph.mul %{{.*}}, %[[H]]
// CHECK: %[[SUM:.*]] = graph.add %[[A]], %[[B]]
// CHECK: %[[DW:.*]] = graph.mul %[[SUM]], %arg3
// CHECK: %[[Z:.*]] = graph.fill {value = 0.000000e+00 : f32} : tensor<3xf32>
// CHECK: return %{{.*}}, %[[DW]], %[[Z]]
func.func @forward(%w: tensor<3xf32> {graph.param = "w", graph.trainable},
                   %u: tensor<3xf32> {graph.param = "unused", graph.trainable},
                   %f: tensor<3xf32> {graph.param = "frozen"},
                   %x: tensor<3xf32> {graph.data = "x"}) -> (tensor<f32> {graph.output = "loss"}) {
  %h = graph.mul %w, %x : tensor<3xf32>, tensor<3xf32>
  %sq = graph.mul %h, %h : tensor<3xf32>, tensor<3xf32>
  %g = graph.add %sq, %f : tensor<3xf32>, tensor<3xf32>
  %l = graph.reduce_sum %g {axes = array<i64: 0>} : tensor<3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
