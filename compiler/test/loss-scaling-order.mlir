// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=sgd lr=0.1 momentum=0.9" --dtc-loss-scaling="init-scale=1024" | FileCheck %s

// A skipped step's choice between the new and the old values follows each update at once, so
// the new values are temporaries of one parameter at a time, not of every parameter at once.
// CHECK-LABEL: func.func @train_step
// CHECK: %new_param, %new_buf = graph.sgd_update
// CHECK-NEXT: graph.select %keep, %new_param
// CHECK-NEXT: graph.select %keep, %new_buf
// CHECK-NEXT: graph.mul
// CHECK-NEXT: %new_param_{{[0-9]+}}, %new_buf_{{[0-9]+}} = graph.sgd_update
// CHECK-NEXT: graph.select %keep, %new_param_
// CHECK-NEXT: graph.select %keep, %new_buf_
func.func @forward(%w1: tensor<4x4xf32> {graph.param = "fc1.weight", graph.trainable},
                   %w2: tensor<3x4xf32> {graph.param = "fc2.weight", graph.trainable},
                   %x: tensor<2x4xf32> {graph.data = "input"},
                   %y: tensor<2xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w1 {transpose_rhs = true} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %1 = graph.matmul %0, %w2 {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %2 = graph.softmax_cross_entropy %1, %y : tensor<2x3xf32>, tensor<2xi64>
  return %2 : tensor<f32>
}
