// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=sgd lr=0.1 momentum=0.9" --dtc-loss-scaling="init-scale=1024" | FileCheck %s

// Backward starts from the loss scale (a state tensor starting at 1024; the seed keeps its mark); the gradient is checked
// for inf/NaN and unscaled before the update; a skipped step keeps the parameter and the
// momentum buffer; the scale and the run of good steps are returned as updated state.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[SCALE:[a-z0-9]+]]: tensor<f32> {graph.initial = 1.024000e+03 : f32, graph.state = "loss_scale"}
// CHECK-SAME: %[[GOOD:[a-z0-9]+]]: tensor<f32> {graph.initial = 0.000000e+00 : f32, graph.state = "loss_scale.good_steps"}
// CHECK: %[[SEED:.*]] = graph.scale %[[SCALE]] {factor = 1.000000e+00 : f32, graph.loss_seed}
// CHECK: graph.softmax_cross_entropy_grad %[[SEED]]
// CHECK: %[[G:.*]] = graph.matmul {{.*}}transpose_lhs = true
// CHECK: %[[BAD:.*]] = graph.nonfinite_count %[[G]]
// CHECK: %keep, %inv_scale, %new_scale, %new_good_steps = graph.loss_scale_step %[[SCALE]], %[[GOOD]], %[[BAD]] {backoff_factor = 5.000000e-01 : f32, growth_factor = 2.000000e+00 : f32, growth_interval = 2000 : i64}
// CHECK: %[[U:.*]] = graph.mul %[[G]], %inv_scale
// CHECK: %new_param, %new_buf = graph.sgd_update %arg0, %[[U]], %arg1
// CHECK: %[[P:.*]] = graph.select %keep, %new_param, %arg0
// CHECK: %[[B:.*]] = graph.select %keep, %new_buf, %arg1
// CHECK: return %{{.*}}, %[[P]], %[[B]], %new_scale, %new_good_steps
func.func @forward(%w: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable},
                   %x: tensor<2x4xf32> {graph.data = "input"},
                   %y: tensor<2xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = graph.softmax_cross_entropy %0, %y : tensor<2x3xf32>, tensor<2xi64>
  return %1 : tensor<f32>
}
