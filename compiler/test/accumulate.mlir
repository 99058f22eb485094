// RUN: dtc-opt %s --dtc-autodiff --dtc-accumulate="micro-batches=2" | FileCheck %s
// RUN: not dtc-opt %s --dtc-autodiff --dtc-accumulate="micro-batches=0" 2>&1 | FileCheck %s --check-prefix=BAD

// Two micro-batches: each data input twice (graph.micro_batch 0 and 1), forward and backward
// once per micro-batch with autodiff's seed 1/2, the gradients summed and the loss the mean of
// the micro-batches' losses (each a mean over its own rows).
// CHECK: module attributes {{{.*}}graph.micro_batches = 2 : i64
// CHECK-LABEL: func.func @grad
// CHECK-SAME: %arg1: tensor<2x4xf32> {graph.data = "input", graph.micro_batch = 0 : i64}
// CHECK-SAME: %arg2: tensor<2x4xf32> {graph.data = "input", graph.micro_batch = 1 : i64}
// CHECK-SAME: %arg3: tensor<2xi64> {graph.data = "target", graph.micro_batch = 0 : i64}
// CHECK-SAME: %arg4: tensor<2xi64> {graph.data = "target", graph.micro_batch = 1 : i64}
// CHECK: graph.matmul %arg1, %arg0
// CHECK: %[[L0:.*]] = graph.softmax_cross_entropy %{{.*}}, %arg3 :
// CHECK: %[[S0:.*]] = graph.fill {graph.loss_seed, value = 5.000000e-01 : f32}
// CHECK: graph.softmax_cross_entropy_grad %[[S0]]
// CHECK: %[[G0:.*]] = graph.matmul {{.*}}transpose_lhs = true
// CHECK: graph.matmul %arg2, %arg0
// CHECK: %[[L1:.*]] = graph.softmax_cross_entropy %{{.*}}, %arg4 :
// CHECK: graph.fill {graph.loss_seed, value = 5.000000e-01 : f32}
// CHECK: %[[G1:.*]] = graph.matmul {{.*}}transpose_lhs = true
// CHECK-DAG: %[[L:.*]] = graph.add %[[L0]], %[[L1]]
// CHECK-DAG: %[[G:.*]] = graph.add %[[G0]], %[[G1]]
// CHECK: %[[MEAN:.*]] = graph.scale %[[L]] {factor = 5.000000e-01 : f32}
// CHECK: return %[[MEAN]], %[[G]]
// BAD: gradient accumulation needs at least 1 micro-batch, got 0
func.func @forward(%w: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable},
                   %x: tensor<2x4xf32> {graph.data = "input"},
                   %y: tensor<2xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = graph.softmax_cross_entropy %0, %y : tensor<2x3xf32>, tensor<2xi64>
  return %1 : tensor<f32>
}
