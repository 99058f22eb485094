// RUN: dtc-opt %s | dtc-opt | FileCheck %s
// RUN: dtc-opt %s --dtc-autodiff | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward
// CHECK: graph.embedding %{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<2x4xi64> -> tensor<2x4x8xf32>
// CHECK: graph.layer_norm {{.*}} {eps = 9.99999974E-6 : f32}
// CHECK: graph.split %{{.*}} {axis = 2 : i64, parts = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4x4xf32>, tensor<2x4x4xf32>
// CHECK: graph.transpose %{{.*}} {perm = array<i64: 1, 0, 2>} : tensor<2x4x4xf32> -> tensor<4x2x4xf32>
// CHECK: graph.batch_matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : tensor<4x2x4xf32>, tensor<4x2x4xf32> -> tensor<4x2x2xf32>
// CHECK: graph.causal_softmax %{{.*}} {scale = 5.000000e-01 : f32} : tensor<4x2x2xf32>
// CHECK: graph.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<4x2x2xf32>, tensor<4x2x2xf32> -> tensor<8x2x2xf32>

// The backward pass: the unused second piece of the split contributes zeros to the concat
// that undoes the split; the embedding's gradient is a scatter-add over the vocabulary.
// GRAD-LABEL: func.func @grad
// GRAD: graph.causal_softmax_grad %{{.*}}, %{{.*}} {scale = 5.000000e-01 : f32}
// GRAD: graph.transpose %{{.*}} {perm = array<i64: 1, 0, 2>}
// GRAD: %[[ZERO:.*]] = graph.fill {value = 0.000000e+00 : f32} : tensor<2x4x4xf32>
// GRAD: graph.concat %{{.*}}, %[[ZERO]] {axis = 2 : i64}
// GRAD: %{{.*}}, %[[DW:.*]], %[[DB:.*]] = graph.layer_norm_grad
// GRAD: %[[DT:.*]] = graph.embedding_grad %{{.*}}, %arg3 {vocab = 16 : i64} : tensor<2x4x8xf32>, tensor<2x4xi64> -> tensor<16x8xf32>
// GRAD: return %{{.*}}, %[[DT]], %[[DW]], %[[DB]]
func.func @forward(%table: tensor<16x8xf32> {graph.param = "wte", graph.trainable},
                   %w: tensor<8xf32> {graph.param = "ln.weight", graph.trainable},
                   %b: tensor<8xf32> {graph.param = "ln.bias", graph.trainable},
                   %ids: tensor<2x4xi64> {graph.data = "idx"}) -> (tensor<f32> {graph.output = "loss"}) {
  %x = graph.embedding %table, %ids : tensor<16x8xf32>, tensor<2x4xi64> -> tensor<2x4x8xf32>
  %y, %mean, %rstd = graph.layer_norm %x, %w, %b {eps = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %p:2 = graph.split %y {axis = 2 : i64, parts = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4x4xf32>, tensor<2x4x4xf32>
  %q = graph.transpose %p#0 {perm = array<i64: 1, 0, 2>} : tensor<2x4x4xf32> -> tensor<4x2x4xf32>
  %s = graph.batch_matmul %q, %q {transpose_rhs = true} : tensor<4x2x4xf32>, tensor<4x2x4xf32> -> tensor<4x2x2xf32>
  %a = graph.causal_softmax %s {scale = 0.5 : f32} : tensor<4x2x2xf32>
  %c = graph.concat %a, %a {axis = 0 : i64} : tensor<4x2x2xf32>, tensor<4x2x2xf32> -> tensor<8x2x2xf32>
  %l = graph.reduce_sum %c {axes = array<i64: 0, 1, 2>} : tensor<8x2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
