// RUN: dtc-opt %s --split-input-file --dtc-ring-attention --verify-diagnostics | FileCheck %s

// cp=2: the forward attends to its own block (kv_shift 0) while the next is shifted in, then to
// that block (kv_shift 1), merging the two; the gathers go. The backward passes the blocks again,
// the float32 sums of the key and value gradients shifted with them, and one last shift brings
// each block's sums home in the gradients' type in place of the reduce-scatters.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: dist.all_gather
// CHECK: %[[K1:.*]] = dist.ring_shift %[[K:.*]] over ["cp"] {shift = 1 : i64}
// CHECK: %[[V1:.*]] = dist.ring_shift %[[V:.*]] over ["cp"] {shift = 1 : i64}
// CHECK: %[[O0:.*]], %[[L0:.*]] = graph.causal_attention %{{.*}}, %[[K]], %[[V]] {kv_shift = 0 : i64, scale = 5.000000e-01 : f32, seq_axes = ["cp"], seq_chunks = 4 : i64}
// CHECK: %[[O1:.*]], %[[L1:.*]] = graph.causal_attention %{{.*}}, %[[K1]], %[[V1]] {kv_shift = 1 : i64, scale = 5.000000e-01 : f32, seq_axes = ["cp"], seq_chunks = 4 : i64}
// CHECK: %[[O:.*]], %[[L:.*]] = graph.attention_merge %[[O0]], %[[L0]], %[[O1]], %[[L1]]
// CHECK: graph.causal_attention_grad %{{.*}}, %{{.*}}, %[[K]], %[[V]], %[[O]], %[[L]] {kv_shift = 0 : i64
// CHECK: %[[DK0:.*]] = graph.cast %dk : tensor<2x1x4x4xbf16> -> tensor<2x1x4x4xf32>
// CHECK: %[[DK0S:.*]] = dist.ring_shift %[[DK0]] over ["cp"] {shift = 1 : i64} : tensor<2x1x4x4xf32>
// CHECK: graph.causal_attention_grad {{.*}} {kv_shift = 1 : i64
// CHECK: %[[DK:.*]] = graph.add %[[DK0S]], %{{.*}} : tensor<2x1x4x4xf32>
// CHECK: %[[DKH:.*]] = graph.cast %[[DK]] : tensor<2x1x4x4xf32> -> tensor<2x1x4x4xbf16>
// CHECK: %[[HOME:.*]] = dist.ring_shift %[[DKH]] over ["cp"]
// CHECK: return %[[O]], %{{.*}}, %[[HOME]], %{{.*}} :
module attributes {dist.mesh = #dist.mesh<cp = 2>} {
  func.func @train_step(%q: tensor<2x1x4x4xbf16>, %k: tensor<2x1x4x4xbf16>,
                        %v: tensor<2x1x4x4xbf16>, %dout: tensor<2x1x4x4xbf16>)
      -> (tensor<2x1x4x4xbf16>, tensor<2x1x4x4xbf16>, tensor<2x1x4x4xbf16>, tensor<2x1x4x4xbf16>) {
    %kg = dist.all_gather %k over ["cp"] {dim = 2 : i64} : tensor<2x1x4x4xbf16> -> tensor<2x1x8x4xbf16>
    %vg = dist.all_gather %v over ["cp"] {dim = 2 : i64} : tensor<2x1x4x4xbf16> -> tensor<2x1x8x4xbf16>
    %o, %l = graph.causal_attention %q, %kg, %vg {scale = 0.5 : f32, seq_axes = ["cp"], seq_chunks = 4 : i64} : (tensor<2x1x4x4xbf16>, tensor<2x1x8x4xbf16>, tensor<2x1x8x4xbf16>) -> (tensor<2x1x4x4xbf16>, tensor<2x1x4xf32>)
    %dq, %dk, %dv = graph.causal_attention_grad %dout, %q, %kg, %vg, %o, %l {scale = 0.5 : f32, seq_axes = ["cp"], seq_chunks = 4 : i64} : (tensor<2x1x4x4xbf16>, tensor<2x1x4x4xbf16>, tensor<2x1x8x4xbf16>, tensor<2x1x8x4xbf16>, tensor<2x1x4x4xbf16>, tensor<2x1x4xf32>) -> (tensor<2x1x4x4xbf16>, tensor<2x1x8x4xbf16>, tensor<2x1x8x4xbf16>)
    %dks = dist.reduce_scatter %dk over ["cp"] {dim = 2 : i64} : tensor<2x1x8x4xbf16> -> tensor<2x1x4x4xbf16>
    %dvs = dist.reduce_scatter %dv over ["cp"] {dim = 2 : i64} : tensor<2x1x8x4xbf16> -> tensor<2x1x4x4xbf16>
    return %o, %dq, %dks, %dvs : tensor<2x1x4x4xbf16>, tensor<2x1x4x4xbf16>, tensor<2x1x4x4xbf16>, tensor<2x1x4x4xbf16>
  }
}

// -----

// Keys the partitioner did not gather over the query axes: nothing to make a ring of.
module attributes {dist.mesh = #dist.mesh<cp = 2>} {
  func.func @train_step(%q: tensor<1x1x4x4xf32>, %k: tensor<1x1x8x4xf32>, %v: tensor<1x1x8x4xf32>)
      -> tensor<1x1x4x4xf32> {
    // expected-error @+1 {{ring attention needs its keys and values gathered over ["cp"] along the sequence}}
    %o, %l = graph.causal_attention %q, %k, %v {scale = 0.5 : f32, seq_axes = ["cp"]} : (tensor<1x1x4x4xf32>, tensor<1x1x8x4xf32>, tensor<1x1x8x4xf32>) -> (tensor<1x1x4x4xf32>, tensor<1x1x4xf32>)
    return %o : tensor<1x1x4x4xf32>
  }
}
