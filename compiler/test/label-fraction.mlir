// RUN: dtc-opt %s --dtc-autodiff --dtc-accumulate="micro-batches=2" | FileCheck %s

// A loss over the labels that are not ignore_index divides by their fraction in the whole step:
// each micro-batch's label_fraction becomes the mean of both, computed from the labels first.
// CHECK-LABEL: func.func @grad
// CHECK-SAME: %arg3: tensor<4xi64> {graph.data = "target", graph.micro_batch = 0 : i64}
// CHECK-SAME: %arg4: tensor<4xi64> {graph.data = "target", graph.micro_batch = 1 : i64}
// CHECK-NEXT: %[[F0:.*]] = graph.label_fraction %arg3 {ignore_index = -100 : i64}
// CHECK-NEXT: %[[F1:.*]] = graph.label_fraction %arg4 {ignore_index = -100 : i64}
// CHECK-NEXT: %[[SUM:.*]] = graph.add %[[F0]], %[[F1]]
// CHECK-NEXT: %[[MEAN:.*]] = graph.scale %[[SUM]] {factor = 5.000000e-01 : f32}
// CHECK-NOT: graph.label_fraction
// CHECK: graph.softmax_cross_entropy %{{.*}}, %arg3 {ignore_index = -100 : i64}
// CHECK: graph.div %{{.*}}, %[[MEAN]]
// CHECK: graph.softmax_cross_entropy_grad {{.*}}ignore_index = -100 : i64
// CHECK: graph.softmax_cross_entropy %{{.*}}, %arg4 {ignore_index = -100 : i64}
// CHECK: graph.div %{{.*}}, %[[MEAN]]
func.func @forward(%w: tensor<3x5xf32> {graph.param = "w", graph.trainable},
                   %x: tensor<4x5xf32> {graph.data = "input"},
                   %y: tensor<4xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<4x5xf32>, tensor<3x5xf32> -> tensor<4x3xf32>
  %1 = graph.softmax_cross_entropy %0, %y {ignore_index = -100 : i64} : tensor<4x3xf32>, tensor<4xi64>
  %2 = graph.label_fraction %y {ignore_index = -100 : i64} : tensor<4xi64>
  %3 = graph.div %1, %2 : tensor<f32>, tensor<f32>
  return %3 : tensor<f32>
}
