// RUN: not dtc-opt %s -split-input-file --dtc-sharding-propagation --dtc-partition 2>&1 | FileCheck %s
// Shardings that cannot be: one-line errors naming the tensor, never a wrong shape.

// A user annotation that does not divide.
module attributes {dist.mesh = #dist.mesh<dp = 4>} {
  // CHECK: cannot shard argument 0 'tensor<6xf32>': dimension 0 of size 6 does not divide over mesh axes {dp} (4 devices)
  func.func @user_error(%x: tensor<6xf32> {dist.sharding = #dist.sharding<[{dp}]>}) -> tensor<6xf32> {
    %r = graph.relu %x : tensor<6xf32>
    return %r : tensor<6xf32>
  }
}

// -----

// A required result sharding that does not divide.
// CHECK: cannot shard result 0 of graph.relu 'tensor<6xf32>': dimension 0 of size 6 does not divide over mesh axes {dp} (4 devices)
module attributes {dist.mesh = #dist.mesh<dp = 4>} {
  func.func @uneven(%x: tensor<6xf32>) -> (tensor<6xf32> {dist.sharding = #dist.sharding<[{dp}]>}) {
    %r = graph.relu %x : tensor<6xf32>
    return %r : tensor<6xf32>
  }
}

// -----

// A dropout on a tensor split in chunks: a block of chunks has no one place in the whole to draw
// the mask for.
// CHECK: error: {{.*}}cannot draw a dropout mask on a tensor split in chunks (dimension 1)
module attributes {dist.mesh = #dist.mesh<tp = 2>} {
  func.func @chunks(%x: tensor<4x8xf32> {dist.sharding = #dist.sharding<[{}, 2 x {tp}]>})
      -> (tensor<4x8xf32> {dist.sharding = #dist.sharding<[{}, 2 x {tp}]>}) {
    %a = graph.dropout %x {ratio = 0.5 : f32, key = 1 : i64} : tensor<4x8xf32>
    return %a : tensor<4x8xf32>
  }
}
