// RUN: dtc-opt %s | dtc-opt | FileCheck %s
// Every op parses, verifies, prints and re-parses to the same form.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: graph.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32>
  %0 = graph.add %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: graph.sub
  %1 = graph.sub %0, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: graph.mul
  %2 = graph.mul %1, %a : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK: graph.relu %{{.*}} : tensor<2x3xf32>
  %3 = graph.relu %2 : tensor<2x3xf32>
  // CHECK: graph.gelu %{{.*}} {approximate_tanh = true} : tensor<2x3xf32>
  %4 = graph.gelu %3 {approximate_tanh = true} : tensor<2x3xf32>
  // CHECK: graph.tanh
  %5 = graph.tanh %4 : tensor<2x3xf32>
  // CHECK: graph.relu_grad
  %6 = graph.relu_grad %5, %a : tensor<2x3xf32>
  // CHECK: graph.tanh_grad
  %7 = graph.tanh_grad %6, %5 : tensor<2x3xf32>
  // CHECK: graph.gelu_grad
  %8 = graph.gelu_grad %7, %a : tensor<2x3xf32>
  return %8 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK: graph.reduce_sum %{{.*}} {axes = array<i64: 0>} : tensor<2x3xf32> -> tensor<3xf32>
  %0 = graph.reduce_sum %a {axes = array<i64: 0>} : tensor<2x3xf32> -> tensor<3xf32>
  // CHECK: graph.reduce_sum %{{.*}} {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  %1 = graph.reduce_sum %a {axes = array<i64: 1>, keepdims = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  // CHECK: graph.broadcast %{{.*}} : tensor<2x1xf32> -> tensor<2x3xf32>
  %2 = graph.broadcast %1 : tensor<2x1xf32> -> tensor<2x3xf32>
  // CHECK: graph.reshape %{{.*}} : tensor<2x3xf32> -> tensor<6xf32>
  %3 = graph.reshape %2 : tensor<2x3xf32> -> tensor<6xf32>
  // CHECK: graph.fill {value = 2.500000e+00 : f32} : tensor<2x3xf32>
  %4 = graph.fill {value = 2.5 : f32} : tensor<2x3xf32>
  return %4 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @matmul_and_losses
func.func @matmul_and_losses(%x: tensor<4x8xf32>, %w: tensor<5x8xf32>, %y: tensor<4xi64>,
                             %t: tensor<4x5xf32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: graph.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<4x8xf32>, tensor<5x8xf32> -> tensor<4x5xf32>
  %0 = graph.matmul %x, %w {transpose_rhs = true} : tensor<4x8xf32>, tensor<5x8xf32> -> tensor<4x5xf32>
  // CHECK: graph.softmax_cross_entropy %{{.*}}, %{{.*}} : tensor<4x5xf32>, tensor<4xi64>
  %1 = graph.softmax_cross_entropy %0, %y : tensor<4x5xf32>, tensor<4xi64>
  // CHECK: graph.mse
  %2 = graph.mse %0, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<f32>
  return %1, %2 : tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @updates
func.func @updates(%p: tensor<3xf32>, %g: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>,
                   %s: tensor<f32>, %lr: tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>) {
  // CHECK: graph.sgd_update
  %0:2 = graph.sgd_update %p, %g, %m, %lr {momentum = 0.9 : f32, weight_decay = 0.0 : f32} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
  // CHECK: graph.adamw_update
  %1:3 = graph.adamw_update %p, %g, %m, %v, %s, %lr {beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.01 : f32} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  return %0#0, %1#0 : tensor<3xf32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @clipping
func.func @clipping(%g: tensor<3xf32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: graph.sum_squares
  %0 = graph.sum_squares %g : tensor<3xf32> -> tensor<f32>
  // CHECK: graph.clip_coefficient
  %1:2 = graph.clip_coefficient %0 {max_norm = 1.0 : f32} : (tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %1#0, %1#1 : tensor<f32>, tensor<f32>
}
