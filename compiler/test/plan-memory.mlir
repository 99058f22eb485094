// RUN: dtc-opt %s --dtc-autodiff --dtc-optimizer="optimizer=sgd lr=0.1 momentum=0.9" --dtc-plan-memory | FileCheck %s

// Parameters and optimizer state share one persistent region (64-byte aligned, in order).
// CHECK: plan.state_bytes = 256 : i64, plan.state_layout = {w = 0 : i64, w.momentum_buffer = 128 : i64, w2 = 64 : i64, w2.momentum_buffer = 192 : i64}

// @forward: x at arena 0 and h1 at 64; h2 cannot reuse either (both still live) and goes to
// 128; the loss reuses h1's slot, which is free once h2 has been computed.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: plan.arena_bytes = 192 : i64, plan.arg_offsets = array<i64: 0, 64, 0>, plan.arg_regions = array<i64: 0, 0, 1>
// CHECK: graph.mul %arg2, %arg0 {plan.offsets = array<i64: 64>, plan.regions = array<i64: 1>}
// CHECK: graph.mul %{{.*}}, %arg1 {plan.offsets = array<i64: 128>, plan.regions = array<i64: 1>}
// CHECK: graph.mse {{.*}}plan.offsets = array<i64: 64>

// @train_step: the updates write straight into the parameter and buffer storage (region 0).
// CHECK-LABEL: func.func @train_step
// CHECK: graph.sgd_update %arg0, {{.*}} {momentum = {{.*}}, plan.offsets = array<i64: 0, 128>, plan.regions = array<i64: 0, 0>
// CHECK: graph.sgd_update %arg1, {{.*}} {momentum = {{.*}}, plan.offsets = array<i64: 64, 192>, plan.regions = array<i64: 0, 0>

func.func @forward(%w: tensor<8xf32> {graph.param = "w", graph.trainable},
                   %w2: tensor<8xf32> {graph.param = "w2", graph.trainable},
                   %x: tensor<8xf32> {graph.data = "x"}) -> (tensor<f32> {graph.output = "loss"}) {
  %h1 = graph.mul %x, %w : tensor<8xf32>, tensor<8xf32>
  %h2 = graph.mul %h1, %w2 : tensor<8xf32>, tensor<8xf32>
  %l = graph.mse %h2, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
