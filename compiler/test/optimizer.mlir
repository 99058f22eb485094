// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=adamw lr=0.001" | FileCheck %s --check-prefix=ADAMW
// RUN: not dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=BAD

// SGD with momentum: one buffer per trainable parameter, updated and returned.
// SGD: graph.optimizer = "sgd lr=0.1 momentum=0.9 weight_decay=0"
// SGD-LABEL: func.func @train_step
// SGD-SAME: %arg0: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable}
// SGD-SAME: %arg1: tensor<3x4xf32> {graph.state = "fc.weight.momentum_buffer"}
// SGD-SAME: %arg2: tensor<2x4xf32> {graph.data = "input"}
// SGD-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<3x4xf32> {graph.updates = "fc.weight"}, tensor<3x4xf32> {graph.updates = "fc.weight.momentum_buffer"})
// SGD: %[[P:.*]], %[[B:.*]] = graph.sgd_update %arg0, %{{.*}}, %arg1 {lr = 1.000000e-01 : f32, momentum = 0.899999976 : f32, weight_decay = 0.000000e+00 : f32}
// SGD: return %{{.*}}, %[[P]], %[[B]]

// AdamW: two moments per parameter and one step counter, incremented before the update
// (torch.optim's bias correction uses the 1-based step). Default weight decay 0.01.
// ADAMW: graph.optimizer = "adamw lr=0.001 betas=(0.9,0.999) eps=1e-08 weight_decay=0.01"
// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME: {graph.state = "fc.weight.exp_avg"}
// ADAMW-SAME: {graph.state = "fc.weight.exp_avg_sq"}
// ADAMW-SAME: %[[STEP:arg[0-9]+]]: tensor<f32> {graph.state = "optimizer.step"}
// ADAMW: %[[T:.*]] = graph.add %[[STEP]], %{{.*}} : tensor<f32>, tensor<f32>
// ADAMW: graph.adamw_update %arg0, %{{.*}}, %arg1, %arg2, %[[T]] {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, eps = 9.99999993E-9 : f32, lr = 1.000000e-03 : f32, weight_decay = 0.00999999977 : f32}
// ADAMW: return {{.*}}, %[[T]] :

// BAD: unknown optimizer 'lion' (expected sgd or adamw)

func.func @forward(%w: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable},
                   %x: tensor<2x4xf32> {graph.data = "input"},
                   %y: tensor<2xi64> {graph.data = "target"}) -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = graph.softmax_cross_entropy %0, %y : tensor<2x3xf32>, tensor<2xi64>
  return %1 : tensor<f32>
}
