// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=adamw lr=0.001" | FileCheck %s --check-prefix=ADAMW
// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=adamw lr=0.001 no-decay=*.bias lr-schedule=cosine warmup-steps=10 decay-steps=100 min-lr=1e-4" | FileCheck %s --check-prefix=GROUPS
// RUN: not dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=adamw no-decay=*.gamma" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=adamw lr-schedule=cosine warmup-steps=10 decay-steps=10" 2>&1 | FileCheck %s --check-prefix=NODECAY
// RUN: not dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=adamw warmup-steps=10" 2>&1 | FileCheck %s --check-prefix=CONSTANT

// SGD with momentum: one buffer per trainable parameter, updated and returned. The learning
// rate is an argument the runtime sets before each step, following the module's schedule.
// SGD: graph.lr_schedule = {decay_steps = 0 : i64, kind = "constant", lr = 1.000000e-01 : f64, min_lr = 0.000000e+00 : f64, warmup_steps = 0 : i64}
// SGD-SAME: graph.optimizer = "sgd lr=0.1 momentum=0.9 weight_decay=0"
// SGD-LABEL: func.func @train_step
// SGD-SAME: %arg0: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable, graph.weight_decay = 0.000000e+00 : f64}
// SGD-SAME: %arg2: tensor<3x4xf32> {graph.state = "fc.weight.momentum_buffer"}
// SGD-SAME: %arg4: tensor<2x4xf32> {graph.data = "input"}
// SGD-SAME: %[[LR:arg[0-9]+]]: tensor<f32> {graph.hyper = "lr"}
// SGD-SAME: -> (tensor<f32> {graph.output = "loss"}, tensor<3x4xf32> {graph.updates = "fc.weight"}, tensor<3xf32> {graph.updates = "fc.bias"}, tensor<3x4xf32> {graph.updates = "fc.weight.momentum_buffer"}
// SGD: %[[P:.*]], %[[B:.*]] = graph.sgd_update %arg0, %{{.*}}, %arg2, %[[LR]] {momentum = 0.899999976 : f32, weight_decay = 0.000000e+00 : f32}
// SGD: return %{{.*}}, %[[P]], %{{.*}}, %[[B]]

// AdamW: two moments per parameter and one step counter, incremented before the update
// (torch.optim's bias correction uses the 1-based step). Default weight decay 0.01.
// ADAMW: graph.optimizer = "adamw lr=0.001 betas=(0.9,0.999) eps=1e-08 weight_decay=0.01"
// ADAMW-LABEL: func.func @train_step
// ADAMW-SAME: {graph.state = "fc.weight.exp_avg"}
// ADAMW-SAME: {graph.state = "fc.weight.exp_avg_sq"}
// ADAMW-SAME: %[[STEP:arg[0-9]+]]: tensor<f32> {graph.state = "optimizer.step"}
// ADAMW-SAME: %[[LR:arg[0-9]+]]: tensor<f32> {graph.hyper = "lr"}
// ADAMW: %[[T:.*]] = graph.add %[[STEP]], %{{.*}} : tensor<f32>, tensor<f32>
// ADAMW: graph.adamw_update %arg0, %{{.*}}, %arg2, %arg3, %[[T]], %[[LR]] {beta1 = 0.899999976 : f32, beta2 = 9.990000e-01 : f32, eps = 9.99999993E-9 : f32, weight_decay = 0.00999999977 : f32}
// ADAMW: return {{.*}}, %[[T]] :

// Decay groups: the bias matches '*.bias' and updates without weight decay; the weight keeps
// AdamW's 0.01. The schedule is recorded for the runtime.
// GROUPS: graph.lr_schedule = {decay_steps = 100 : i64, kind = "cosine", lr = 1.000000e-03 : f64, min_lr = 1.000000e-04 : f64, warmup_steps = 10 : i64}
// GROUPS-SAME: graph.optimizer = "adamw lr=0.001 betas=(0.9,0.999) eps=1e-08 weight_decay=0.01 (none on *.bias), cosine schedule (warmup 10, decay to 0.0001 at 100)"
// GROUPS-LABEL: func.func @train_step
// GROUPS-SAME: {graph.param = "fc.weight", graph.trainable, graph.weight_decay = 1.000000e-02 : f64}
// GROUPS-SAME: {graph.param = "fc.bias", graph.trainable, graph.weight_decay = 0.000000e+00 : f64}
// GROUPS: graph.adamw_update %arg0, {{.*}} weight_decay = 0.00999999977 : f32
// GROUPS: graph.adamw_update %arg1, {{.*}} weight_decay = 0.000000e+00 : f32

// BAD: unknown optimizer 'lion' (expected sgd or adamw)
// NOMATCH: no-decay pattern '*.gamma' matches no trainable parameter
// NODECAY: the cosine schedule decays from the end of the warmup (10) to the decay steps, which must be larger (got 10)
// CONSTANT: warmup, decay steps and min-lr need the cosine or linear schedule

func.func @forward(%w: tensor<3x4xf32> {graph.param = "fc.weight", graph.trainable},
                   %bias: tensor<3xf32> {graph.param = "fc.bias", graph.trainable},
                   %x: tensor<2x4xf32> {graph.data = "input"},
                   %y: tensor<2xi64> {graph.data = "target"}) -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = graph.add %0, %bias : tensor<2x3xf32>, tensor<3xf32>
  %2 = graph.softmax_cross_entropy %1, %y : tensor<2x3xf32>, tensor<2xi64>
  return %2 : tensor<f32>
}
