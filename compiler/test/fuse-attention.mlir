// RUN: dtc-opt %s --dtc-fuse-attention | FileCheck %s
// RUN: dtc-opt %s --dtc-fuse-attention --dtc-autodiff | FileCheck %s --check-prefix=GRAD

// q·kᵀ → causal softmax → ·v becomes one op (its [8, 8] scores never stored); autodiff
// differentiates it with the fused gradient, which reads the saved log-sum-exp.
// CHECK-LABEL: func.func @forward
// CHECK: %[[Q:.*]] = graph.mul %arg1, %arg0
// CHECK: %[[OUT:.*]], %[[LSE:.*]] = graph.causal_attention %[[Q]], %arg2, %arg3 {scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
// CHECK-NOT: causal_softmax
// CHECK: graph.mse %[[OUT]]
// GRAD-LABEL: func.func @grad
// GRAD: %[[OUT:.*]], %[[LSE:.*]] = graph.causal_attention
// GRAD: graph.causal_attention_grad %{{.*}}, %{{.*}}, %arg2, %arg3, %[[OUT]], %[[LSE]] {scale = 2.500000e-01 : f32}
func.func @forward(%w: tensor<16xf32> {graph.param = "w", graph.trainable},
                   %q: tensor<2x4x8x16xf32> {graph.data = "q"}, %k: tensor<2x4x8x16xf32> {graph.data = "k"},
                   %v: tensor<2x4x8x16xf32> {graph.data = "v"}, %y: tensor<2x4x8x16xf32> {graph.data = "y"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %qw = graph.mul %q, %w : tensor<2x4x8x16xf32>, tensor<16xf32>
  %s = graph.batch_matmul %qw, %k {transpose_rhs = true} : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  %p = graph.causal_softmax %s {scale = 0.25 : f32} : tensor<2x4x8x8xf32>
  %o = graph.batch_matmul %p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %l = graph.mse %o, %y : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
