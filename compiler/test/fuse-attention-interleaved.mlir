// RUN: dtc-opt %s --dtc-fuse-attention | FileCheck %s

// k and v tiled rather than repeated head by head ([2, 1, 2, ...] → [2, 3, 2, ...]): query head h
// reads key/value head h mod 2, not h / 3, which is no grouping the fused op knows, so the copies
// stay and the op reads them as they are.
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: graph.broadcast
// CHECK: graph.causal_attention %{{.*}} : (tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32>)
func.func @forward(%w: tensor<16xf32> {graph.param = "w", graph.trainable},
                   %q: tensor<2x6x8x16xf32> {graph.data = "q"}, %k: tensor<2x2x8x16xf32> {graph.data = "k"},
                   %v: tensor<2x2x8x16xf32> {graph.data = "v"}, %y: tensor<2x6x8x16xf32> {graph.data = "y"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %qw = graph.mul %q, %w : tensor<2x6x8x16xf32>, tensor<16xf32>
  %k1 = graph.reshape %k : tensor<2x2x8x16xf32> -> tensor<2x1x2x8x16xf32>
  %k3 = graph.broadcast %k1 : tensor<2x1x2x8x16xf32> -> tensor<2x3x2x8x16xf32>
  %kr = graph.reshape %k3 : tensor<2x3x2x8x16xf32> -> tensor<2x6x8x16xf32>
  %v1 = graph.reshape %v : tensor<2x2x8x16xf32> -> tensor<2x1x2x8x16xf32>
  %v3 = graph.broadcast %v1 : tensor<2x1x2x8x16xf32> -> tensor<2x3x2x8x16xf32>
  %vr = graph.reshape %v3 : tensor<2x3x2x8x16xf32> -> tensor<2x6x8x16xf32>
  %s = graph.batch_matmul %qw, %kr {transpose_rhs = true} : tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32> -> tensor<2x6x8x8xf32>
  %p = graph.causal_softmax %s {scale = 0.25 : f32} : tensor<2x6x8x8xf32>
  %o = graph.batch_matmul %p, %vr : tensor<2x6x8x8xf32>, tensor<2x6x8x16xf32> -> tensor<2x6x8x16xf32>
  %l = graph.mse %o, %y : (tensor<2x6x8x16xf32>, tensor<2x6x8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
