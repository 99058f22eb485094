// RUN: dtc-opt %s --dtc-autodiff --dtc-lower-to-kernels | FileCheck %s

// A log-softmax's gradient is the log-softmax gradient (dx = dy − exp(y)·Σdy), not softmax's:
// autodiff carries `log` to the gradient op and the lowering writes it on both kernels.
// CHECK-LABEL: func.func @grad
// CHECK: plan.kernel "softmax"(%{{.*}}) {log = true, scale = 5.000000e-01 : f32}
// CHECK: plan.kernel "softmax_grad"(%{{.*}}, %{{.*}}) {log = true, scale = 5.000000e-01 : f32}
func.func @forward(%w: tensor<2x5xf32> {graph.param = "w", graph.trainable},
                   %y: tensor<2xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.softmax %w {scale = 0.5 : f32, log = true} : tensor<2x5xf32>
  %1 = graph.softmax_cross_entropy %0, %y : tensor<2x5xf32>, tensor<2xi64>
  return %1 : tensor<f32>
}
