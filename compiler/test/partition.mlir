// RUN: dtc-opt %s -split-input-file --dtc-sharding-propagation --dtc-partition | FileCheck %s

// Partial -> replicated: the weight gradient (a contraction over the split batch) is summed by
// an all-reduce right after it is produced; local shapes everywhere; the loss divides by the
// global batch (count = 8).
// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%arg0: tensor<4x3xf32> {{.*}}, %arg1: tensor<4xi64> {{.*}}) -> (tensor<f32> {{.*}}, tensor<3x3xf32>
// CHECK: %[[L:.*]] = graph.softmax_cross_entropy %arg0, %arg1 {count = 8 : i64
// CHECK-NEXT: %[[LR:.*]] = dist.all_reduce %[[L]] over ["dp"] : tensor<f32> -> tensor<f32>
// CHECK: %[[G:.*]] = graph.matmul %{{.*}}, %arg0 {{.*}} : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<3x3xf32>
// CHECK-NEXT: %[[GR:.*]] = dist.all_reduce %[[G]] over ["dp"] : tensor<3x3xf32> -> tensor<3x3xf32>
// CHECK: return %[[LR]], %[[GR]]
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @all_reduce(%x: tensor<8x3xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>},
                        %y: tensor<8xi64> {dist.sharding = #dist.sharding<[{dp}]>})
      -> (tensor<f32> {dist.sharding = #dist.sharding<[]>}, tensor<3x3xf32> {dist.sharding = #dist.sharding<[{}, {}]>}) {
    %l = graph.softmax_cross_entropy %x, %y : tensor<8x3xf32>, tensor<8xi64>
    %one = graph.fill {value = 1.0 : f32} : tensor<f32>
    %d = graph.softmax_cross_entropy_grad %one, %x, %y : (tensor<f32>, tensor<8x3xf32>, tensor<8xi64>) -> tensor<8x3xf32>
    %g = graph.matmul %d, %x {transpose_lhs = true} : tensor<8x3xf32>, tensor<8x3xf32> -> tensor<3x3xf32>
    return %l, %g : tensor<f32>, tensor<3x3xf32>
  }
}

// -----

// Partial -> sharded: one reduce-scatter (ZeRO-1's gradient reduction). The reduced dimension
// claims dp first (factor order), so the sum is partial and is scattered straight into the
// requested split.
// CHECK-LABEL: func.func @reduce_scatter
// CHECK: %[[G:.*]] = graph.reduce_sum
// CHECK-NEXT: dist.reduce_scatter %[[G]] over ["dp"] {dim = 0 : i64} : tensor<4xf32> -> tensor<2xf32>
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @reduce_scatter(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>})
      -> (tensor<4xf32> {dist.sharding = #dist.sharding<[{dp}]>}) {
    %g = graph.reduce_sum %x {axes = array<i64: 0>} : tensor<8x4xf32> -> tensor<4xf32>
    return %g : tensor<4xf32>
  }
}

// -----

// Replicated -> sharded is a local slice; sharded -> replicated an all-gather.
// CHECK-LABEL: func.func @slice_and_gather
// CHECK: dist.local_slice %arg0 over ["dp"] {dim = 1 : i64} : tensor<4x6xf32> -> tensor<4x3xf32>
// CHECK: dist.all_gather %{{.*}} over ["dp"] {dim = 1 : i64} : tensor<4x3xf32> -> tensor<4x6xf32>
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @slice_and_gather(%w: tensor<4x6xf32> {dist.sharding = #dist.sharding<[{}, {}]>})
      -> (tensor<4x6xf32> {dist.sharding = #dist.sharding<[{}, {}]>}) {
    %s = dist.reshard %w <[{}, {dp}]> : tensor<4x6xf32>
    %r = graph.relu %s : tensor<4x6xf32>
    return %r : tensor<4x6xf32>
  }
}

// -----

// Swapping the axes of a 2x4 mesh between dimensions (where MLIR's shard dialect produces
// wrong shapes): gather one axis, move the other with an all-to-all, slice the first back.
// CHECK-LABEL: func.func @transpose_axes
// CHECK-SAME: %arg0: tensor<4x2xf32>
// CHECK-SAME: -> (tensor<2x4xf32>
// CHECK: dist.all_gather %arg0 over ["x"] {dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK: dist.all_to_all %{{.*}} over ["y"] {concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<2x8xf32>
// CHECK: dist.local_slice %{{.*}} over ["x"] {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>
module attributes {dist.mesh = #dist.mesh<x = 2, y = 4>} {
  func.func @transpose_axes(%a: tensor<8x8xf32> {dist.sharding = #dist.sharding<[{x}, {y}]>})
      -> (tensor<8x8xf32> {dist.sharding = #dist.sharding<[{y}, {x}]>}) {
    return %a : tensor<8x8xf32>
  }
}

// -----

// Sums stay pending through an add of two partial values: one all-reduce, not two.
// CHECK-LABEL: func.func @partial_add
// CHECK: graph.add {{.*}}sum = {dp}
// CHECK-NEXT: dist.all_reduce
// CHECK-NOT: dist.all_reduce
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @partial_add(%x: tensor<8x3xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>},
                         %y: tensor<8x3xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>})
      -> (tensor<3xf32> {dist.sharding = #dist.sharding<[{}]>}) {
    %a = graph.reduce_sum %x {axes = array<i64: 0>} : tensor<8x3xf32> -> tensor<3xf32>
    %b = graph.reduce_sum %y {axes = array<i64: 0>} : tensor<8x3xf32> -> tensor<3xf32>
    %c = graph.add %a, %b : tensor<3xf32>, tensor<3xf32>
    return %c : tensor<3xf32>
  }
}


// -----

// Sums stay pending through linear ops: a conv-bias gradient (reduce over the batch, then over
// the spatial dimensions, then reshape) all-reduces its 4 values, not the [4, 3] intermediate.
// CHECK-LABEL: func.func @partial_through_linear
// CHECK: graph.reduce_sum %arg0 {{.*}}sum = {dp}
// CHECK-NEXT: graph.reduce_sum {{.*}}sum = {dp}
// CHECK-NEXT: graph.reshape {{.*}}sum = {dp}
// CHECK-NEXT: dist.all_reduce %{{.*}} over ["dp"] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NOT: dist.all_reduce
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @partial_through_linear(%dy: tensor<8x4x3xf32> {dist.sharding = #dist.sharding<[{dp}, {}, {}]>})
      -> (tensor<4xf32> {dist.sharding = #dist.sharding<[{}]>}) {
    %a = graph.reduce_sum %dy {axes = array<i64: 0>} : tensor<8x4x3xf32> -> tensor<4x3xf32>
    %b = graph.reduce_sum %a {axes = array<i64: 1>, keepdims = true} : tensor<4x3xf32> -> tensor<4x1xf32>
    %c = graph.reshape %b : tensor<4x1xf32> -> tensor<4xf32>
    return %c : tensor<4xf32>
  }
}
