// RUN: dtc-opt %s --dtc-fuse-attention | FileCheck %s
// RUN: dtc-opt %s --dtc-fuse-attention=kv-heads-divisor=2 | FileCheck %s
// RUN: dtc-opt %s --dtc-fuse-attention=kv-heads-divisor=4 | FileCheck %s --check-prefix=KEPT
// RUN: dtc-opt %s --dtc-fuse-attention --dtc-autodiff | FileCheck %s --check-prefix=GRAD

// Grouped-query attention: 6 query heads over 2 key/value heads, k and v repeated to every query
// head as transformers' repeat_kv writes it (unsqueeze, expand, merge). The fused attention reads
// k and v unrepeated, each serving 3 consecutive query heads, where the devices splitting the
// heads (kv-heads-divisor) divide the 2; over 4 of them the repeat stays.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: graph.broadcast
// CHECK: graph.causal_attention %{{.*}}, %arg2, %arg3 {scale = 2.500000e-01 : f32} : (tensor<2x6x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x6x8x16xf32>, tensor<2x6x8xf32>)
// CHECK-NOT: graph.broadcast
// CHECK: return
// KEPT-LABEL: func.func @forward
// KEPT-COUNT-2: graph.broadcast
// KEPT: graph.causal_attention %{{.*}} : (tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32>)
// The backward's key/value gradients come out with k's 2 heads, summed over each group.
// GRAD-LABEL: func.func @grad
// GRAD: graph.causal_attention_grad %{{.*}}, %{{.*}}, %arg2, %arg3, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f32} : {{.*}} -> (tensor<2x6x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
func.func @forward(%w: tensor<16xf32> {graph.param = "w", graph.trainable},
                   %q: tensor<2x6x8x16xf32> {graph.data = "q"}, %k: tensor<2x2x8x16xf32> {graph.data = "k"},
                   %v: tensor<2x2x8x16xf32> {graph.data = "v"}, %y: tensor<2x6x8x16xf32> {graph.data = "y"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %qw = graph.mul %q, %w : tensor<2x6x8x16xf32>, tensor<16xf32>
  %k1 = graph.reshape %k : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %k3 = graph.broadcast %k1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x3x8x16xf32>
  %kr = graph.reshape %k3 : tensor<2x2x3x8x16xf32> -> tensor<2x6x8x16xf32>
  %v1 = graph.reshape %v : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %v3 = graph.broadcast %v1 : tensor<2x2x1x8x16xf32> -> tensor<2x2x3x8x16xf32>
  %vr = graph.reshape %v3 : tensor<2x2x3x8x16xf32> -> tensor<2x6x8x16xf32>
  %s = graph.batch_matmul %qw, %kr {transpose_rhs = true} : tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32> -> tensor<2x6x8x8xf32>
  %p = graph.causal_softmax %s {scale = 0.25 : f32} : tensor<2x6x8x8xf32>
  %o = graph.batch_matmul %p, %vr : tensor<2x6x8x8xf32>, tensor<2x6x8x16xf32> -> tensor<2x6x8x16xf32>
  %l = graph.mse %o, %y : (tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
