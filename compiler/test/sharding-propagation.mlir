// RUN: dtc-opt %s -split-input-file --dtc-sharding-propagation | FileCheck %s

// Forward: the batch split of %x reaches the matmul, relu and the loss; the sum over the batch
// (reduce_sum, and the weight gradient's contraction) leaves partial results. Backward: %y is
// only known through the add that consumes it.
// CHECK-LABEL: func.func @forward_and_backward
// CHECK-SAME: %arg1: tensor<3x4xf32> {dist.sharding = #dist.sharding<[{}, {}]>}
// CHECK-SAME: %arg2: tensor<8x3xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>}
// CHECK-SAME: -> (tensor<3xf32> {dist.sharding = #dist.sharding<[{}]>}, tensor<3x4xf32> {dist.sharding = #dist.sharding<[{}, {}]>})
// CHECK: graph.matmul {{.*}}dist.factors = [{{\[}}"dp"], [], []]{{.*}}dist.shardings = [#dist.sharding<[{dp}, {}]>]
// CHECK: graph.add {{.*}}dist.shardings = [#dist.sharding<[{dp}, {}]>]
// CHECK: graph.reduce_sum {{.*}}dist.shardings = [#dist.sharding<[{}], sum = {dp}>]
// CHECK: graph.matmul {{.*}}dist.shardings = [#dist.sharding<[{}, {}], sum = {dp}>]
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @forward_and_backward(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>},
                                  %w: tensor<3x4xf32>, %y: tensor<8x3xf32>)
      -> (tensor<3xf32>, tensor<3x4xf32>) {
    %h = graph.matmul %x, %w {transpose_rhs = true} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
    %s = graph.add %h, %y : tensor<8x3xf32>, tensor<8x3xf32>
    %r = graph.reduce_sum %s {axes = array<i64: 0>} : tensor<8x3xf32> -> tensor<3xf32>
    %g = graph.matmul %s, %x {transpose_lhs = true} : tensor<8x3xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
    return %r, %g : tensor<3xf32>, tensor<3x4xf32>
  }
}

// -----

// Conflicts: both operands are user-annotated and want dp on different factors of the add.
// An axis shards one factor: the first (dimension 0, from %a) keeps it.
// CHECK-LABEL: func.func @conflict
// CHECK: graph.add {{.*}}dist.factors = [{{\[}}"dp"], []]
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @conflict(%a: tensor<4x4xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>},
                      %b: tensor<4x4xf32> {dist.sharding = #dist.sharding<[{}, {dp}]>}) -> tensor<4x4xf32> {
    %c = graph.add %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
    return %c : tensor<4x4xf32>
  }
}

// -----

// A user annotation beats a propagated sharding with more axes: %b's replicated rows win over
// the dp rows that reach the add from %x. An axis never shards a dimension it does not divide:
// the reshape's result has 2 rows, too few for 4 devices, so it stays whole.
// CHECK-LABEL: func.func @priority_and_divisibility
// CHECK: graph.add {{.*}}dist.shardings = [#dist.sharding<[{}, {}]>]
// CHECK: graph.reshape {{.*}}dist.factors = {{\[\[}}]]{{.*}}dist.shardings = [#dist.sharding<[{}, {}]>]
module attributes {dist.mesh = #dist.mesh<dp = 4>} {
  func.func @priority_and_divisibility(%x: tensor<8x4xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>},
                                       %b: tensor<8x4xf32> {dist.sharding = #dist.sharding<[{}, {}]>})
      -> (tensor<8x4xf32>, tensor<2x16xf32>) {
    %r = graph.relu %x : tensor<8x4xf32>
    %s = graph.add %b, %r : tensor<8x4xf32>, tensor<8x4xf32>
    %t = graph.reshape %x : tensor<8x4xf32> -> tensor<2x16xf32>
    return %s, %t : tensor<8x4xf32>, tensor<2x16xf32>
  }
}

