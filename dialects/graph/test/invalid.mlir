// RUN: dtc-opt %s -split-input-file -verify-diagnostics

func.func @matmul_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{matmul contraction sizes differ: [2,3] x [4,5] (3 vs 4)}}
  // expected-error @+1 {{'graph.matmul' op failed to infer returned types}}
  %0 = graph.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{shapes [2,3] and [4] do not broadcast}}
  %0 = graph.add %a, %b : tensor<2x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @bad_labels(%a: tensor<2x3xf32>, %y: tensor<3xi64>) {
  // expected-error @+1 {{cross-entropy needs logits [N,C] and labels [N] (or [..., C] and [...]), got [2,3] and [3]}}
  %0 = graph.softmax_cross_entropy %a, %y : tensor<2x3xf32>, tensor<3xi64>
  return
}

// -----

func.func @bad_reshape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape [2,3] (6 elements) to [4]}}
  %0 = graph.reshape %a : tensor<2x3xf32> -> tensor<4xf32>
  return
}

// -----

func.func @bad_broadcast(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast [2,3] to [3,3]}}
  %0 = graph.broadcast %a : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @bad_axes(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 out of range for shape [2,3]}}
  %0 = graph.reduce_sum %a {axes = array<i64: 2>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @mse_shapes(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) {
  // expected-error @+1 {{prediction [2,3] and target [3,2] differ in shape}}
  %0 = graph.mse %a, %b : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<f32>
  return
}

// -----

func.func @sgd_types(%p: tensor<3xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{parameter, gradient and momentum buffer must have one type}}
  %0:2 = graph.sgd_update %p, %g, %p, %lr {momentum = 0.0 : f32, weight_decay = 0.0 : f32} : (tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_mismatch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+2 {{batch_matmul batch dimensions differ: [2,3,4] and [3,4,5]}}
  // expected-error @+1 {{'graph.batch_matmul' op failed to infer returned types}}
  %0 = graph.batch_matmul %a, %b : tensor<2x3x4xf32>, tensor<3x4x5xf32> -> tensor<2x3x5xf32>
  return
}

// -----

func.func @bad_perm(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{perm [0,0] is not a permutation of the dimensions of [2,3]}}
  // expected-error @+1 {{'graph.transpose' op failed to infer returned types}}
  %0 = graph.transpose %a {perm = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @uneven_split(%a: tensor<2x5xf32>) {
  // expected-error @+2 {{cannot split dimension 1 of [2,5] into 2 equal parts}}
  // expected-error @+1 {{'graph.split' op failed to infer returned types}}
  %0:2 = graph.split %a {axis = 1 : i64, parts = 2 : i64} : tensor<2x5xf32> -> tensor<2x2xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @not_square(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{needs square [..., T, T] scores, got [2,3]}}
  %0 = graph.causal_softmax %a {scale = 1.0 : f32} : tensor<2x3xf32>
  return
}

// -----

func.func @ln_width(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+2 {{layer_norm needs weight and bias of shape [8], got [4] and [4] for input [2,8]}}
  // expected-error @+1 {{'graph.layer_norm' op failed to infer returned types}}
  %y, %m, %r = graph.layer_norm %x, %w, %w {eps = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}
