// RUN: dtc-opt %s --split-input-file --dtc-ulysses-attention --verify-diagnostics | FileCheck %s

// cp=2, 2 heads: q, k and v go from [2, 2, 4, 4] (both heads, half the sequence) to [2, 1, 8, 4]
// (one head, the whole sequence) by all-to-all; attention runs on whole sequences (seq_axes gone,
// the load-balanced mask's seq_chunks kept); out and lse come back. The backward reuses those
// exchanged operands, exchanges only dout, and sends dq, dk and dv back in place of the
// reduce-scatters; no gather is left.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: dist.all_gather
// CHECK: %[[Q:.*]] = dist.all_to_all %arg0 over ["cp"] {concat_dim = 2 : i64, split_dim = 1 : i64} : tensor<2x2x4x4xf32> -> tensor<2x1x8x4xf32>
// CHECK: %[[K:.*]] = dist.all_to_all %arg1 over ["cp"]
// CHECK: %[[V:.*]] = dist.all_to_all %arg2 over ["cp"]
// CHECK: %[[O:.*]], %[[L:.*]] = graph.causal_attention %[[Q]], %[[K]], %[[V]] {scale = 5.000000e-01 : f32, seq_chunks = 4 : i64}
// CHECK: %[[OUT:.*]] = dist.all_to_all %[[O]] over ["cp"] {concat_dim = 1 : i64, split_dim = 2 : i64} : tensor<2x1x8x4xf32> -> tensor<2x2x4x4xf32>
// CHECK: dist.all_to_all %[[L]] over ["cp"] {concat_dim = 1 : i64, split_dim = 2 : i64} : tensor<2x1x8xf32> -> tensor<2x2x4xf32>
// CHECK: %[[DOUT:.*]] = dist.all_to_all %arg3 over ["cp"]
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = graph.causal_attention_grad %[[DOUT]], %[[Q]], %[[K]], %[[V]], %[[O]], %[[L]] {scale = 5.000000e-01 : f32, seq_chunks = 4 : i64}
// CHECK: %[[DQS:.*]] = dist.all_to_all %[[DQ]] over ["cp"] {concat_dim = 1 : i64, split_dim = 2 : i64}
// CHECK: %[[DKS:.*]] = dist.all_to_all %[[DK]] over ["cp"]
// CHECK: %[[DVS:.*]] = dist.all_to_all %[[DV]] over ["cp"]
// CHECK-NOT: dist.reduce_scatter
// CHECK: return %[[OUT]], %[[DQS]], %[[DKS]], %[[DVS]]
module attributes {dist.mesh = #dist.mesh<cp = 2>} {
  func.func @train_step(%q: tensor<2x2x4x4xf32>, %k: tensor<2x2x4x4xf32>,
                        %v: tensor<2x2x4x4xf32>, %dout: tensor<2x2x4x4xf32>)
      -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) {
    %kg = dist.all_gather %k over ["cp"] {dim = 2 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x8x4xf32>
    %vg = dist.all_gather %v over ["cp"] {dim = 2 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x8x4xf32>
    %o, %l = graph.causal_attention %q, %kg, %vg {scale = 0.5 : f32, seq_axes = ["cp"], seq_chunks = 4 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
    %dq, %dk, %dv = graph.causal_attention_grad %dout, %q, %kg, %vg, %o, %l {scale = 0.5 : f32, seq_axes = ["cp"], seq_chunks = 4 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>)
    %dks = dist.reduce_scatter %dk over ["cp"] {dim = 2 : i64} : tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
    %dvs = dist.reduce_scatter %dv over ["cp"] {dim = 2 : i64} : tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
    return %o, %dq, %dks, %dvs : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  }
}

// -----

// Three heads do not divide over two devices: an error naming the sizes.
module attributes {dist.mesh = #dist.mesh<cp = 2>} {
  func.func @train_step(%q: tensor<1x3x4x4xf32>, %k: tensor<1x3x4x4xf32>, %v: tensor<1x3x4x4xf32>)
      -> tensor<1x3x4x4xf32> {
    %kg = dist.all_gather %k over ["cp"] {dim = 2 : i64} : tensor<1x3x4x4xf32> -> tensor<1x3x8x4xf32>
    %vg = dist.all_gather %v over ["cp"] {dim = 2 : i64} : tensor<1x3x4x4xf32> -> tensor<1x3x8x4xf32>
    // expected-error @+1 {{ulysses attention (--cp-attention ulysses): 3 attention heads (per tensor-parallel rank) do not divide over 2 devices of ["cp"]}}
    %o, %l = graph.causal_attention %q, %kg, %vg {scale = 0.5 : f32, seq_axes = ["cp"]} : (tensor<1x3x4x4xf32>, tensor<1x3x8x4xf32>, tensor<1x3x8x4xf32>) -> (tensor<1x3x4x4xf32>, tensor<1x3x4xf32>)
    return %o : tensor<1x3x4x4xf32>
  }
}
