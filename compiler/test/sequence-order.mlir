// RUN: dtc-opt %s --split-input-file --dtc-sequence-order=chunks=4 --verify-diagnostics | FileCheck %s

// Load-balanced context parallelism: a position table added to the tokens is read in the
// sequence's order (chunks 0, 3, 1, 2 of 4) through a split and a concat; attention needs nothing.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]]:4 = graph.split %arg0 {axis = 0 : i64, parts = 4 : i64}
// CHECK: %[[T:.*]] = graph.concat %[[P]]#0, %[[P]]#3, %[[P]]#1, %[[P]]#2 {axis = 0 : i64}
// CHECK: graph.add %{{.*}}, %[[T]]
module {
  func.func @forward(%arg0: tensor<8x4xf32> {graph.param = "wpe", graph.trainable},
                     %arg1: tensor<16x4xf32> {graph.param = "wte", graph.trainable},
                     %arg2: tensor<2x8xi64> {graph.batch_dim = 0 : i64, graph.data = "idx"})
      -> (tensor<2x1x8x4xf32> {graph.output = "out"}) {
    %e = graph.embedding %arg1, %arg2 : tensor<16x4xf32>, tensor<2x8xi64> -> tensor<2x8x4xf32>
    %x = graph.add %e, %arg0 : tensor<2x8x4xf32>, tensor<8x4xf32>
    %h = graph.reshape %x : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
    %o, %l = graph.causal_attention %h, %h, %h {scale = 0.5 : f32} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> (tensor<2x1x8x4xf32>, tensor<2x1x8xf32>)
    return %o : tensor<2x1x8x4xf32>
  }
}

// -----

// Dropout draws its mask by element index: a reordered sequence would draw other masks.
module {
  func.func @forward(%arg0: tensor<16x4xf32> {graph.param = "wte", graph.trainable},
                     %arg1: tensor<2x8xi64> {graph.batch_dim = 0 : i64, graph.data = "idx"})
      -> (tensor<2x1x8x4xf32> {graph.output = "out"}) {
    %e = graph.embedding %arg0, %arg1 : tensor<16x4xf32>, tensor<2x8xi64> -> tensor<2x8x4xf32>
    // expected-error @+1 {{would draw other masks than one device on a load-balanced sequence; compile with --no-cp-load-balance}}
    %d = graph.dropout %e {ratio = 0.1 : f32, key = 11 : i64} : tensor<2x8x4xf32>
    %h = graph.reshape %d : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
    %o, %l = graph.causal_attention %h, %h, %h {scale = 0.5 : f32} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> (tensor<2x1x8x4xf32>, tensor<2x1x8xf32>)
    return %o : tensor<2x1x8x4xf32>
  }
}

// -----

// A slice along the sequence reads it in order.
module {
  func.func @forward(%arg0: tensor<16x4xf32> {graph.param = "wte", graph.trainable},
                     %arg1: tensor<2x8xi64> {graph.batch_dim = 0 : i64, graph.data = "idx"})
      -> (tensor<2x1x8x4xf32> {graph.output = "out"}) {
    %e = graph.embedding %arg0, %arg1 : tensor<16x4xf32>, tensor<2x8xi64> -> tensor<2x8x4xf32>
    // expected-error @+1 {{load-balanced context parallelism reorders the sequence, but '' (graph.split) splits the sequence; compile with --no-cp-load-balance}}
    %s:2 = graph.split %e {axis = 1 : i64, parts = 2 : i64} : tensor<2x8x4xf32> -> tensor<2x4x4xf32>, tensor<2x4x4xf32>
    %c = graph.concat %s#1, %s#0 {axis = 1 : i64} : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x8x4xf32>
    %h = graph.reshape %c : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
    %o, %l = graph.causal_attention %h, %h, %h {scale = 0.5 : f32} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> (tensor<2x1x8x4xf32>, tensor<2x1x8xf32>)
    return %o : tensor<2x1x8x4xf32>
  }
}

// -----

// Each op says what it does to positions: a sum over features is one the trace does not follow
// (the op's own rule says so), so a load-balanced sequence is refused there, not guessed at.
module {
  func.func @forward(%arg0: tensor<16x4xf32> {graph.param = "wte", graph.trainable},
                     %arg1: tensor<2x8xi64> {graph.batch_dim = 0 : i64, graph.data = "idx"})
      -> (tensor<2x1x8x4xf32> {graph.output = "out"}) {
    %e = graph.embedding %arg0, %arg1 : tensor<16x4xf32>, tensor<2x8xi64> -> tensor<2x8x4xf32>
    // expected-error @+1 {{(graph.reduce_sum) sums over dimensions, which the trace does not follow; compile with --no-cp-load-balance}}
    %s = graph.reduce_sum %e {axes = array<i64: 2>, keepdims = true} : tensor<2x8x4xf32> -> tensor<2x8x1xf32>
    %b = graph.broadcast %s : tensor<2x8x1xf32> -> tensor<2x8x4xf32>
    %h = graph.reshape %b : tensor<2x8x4xf32> -> tensor<2x1x8x4xf32>
    %o, %l = graph.causal_attention %h, %h, %h {scale = 0.5 : f32} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> (tensor<2x1x8x4xf32>, tensor<2x1x8xf32>)
    return %o : tensor<2x1x8x4xf32>
  }
}
