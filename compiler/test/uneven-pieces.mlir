// RUN: dtc-opt %s --dtc-sharding-propagation --dtc-partition | FileCheck %s

// Pieces of different lengths keep the split axis whole: an operand split along it is gathered
// first, while a dimension beside it stays split (here the rows, over dp).
// CHECK-LABEL: func.func @uneven
// CHECK: %[[X:.*]] = dist.all_gather %arg0 over ["tp"] {dim = 1 : i64} : tensor<2x6xf32> -> tensor<2x12xf32>
// CHECK: %{{.*}}:3 = graph.split %[[X]] {axis = 1 : i64, {{.*}}parts = 3 : i64, sizes = array<i64: 8, 2, 2>} : tensor<2x12xf32> -> tensor<2x8xf32>, tensor<2x2xf32>, tensor<2x2xf32>
// CHECK: graph.concat %{{.*}} {axis = 1 : i64{{.*}}} : tensor<2x2xf32>, tensor<2x8xf32> -> tensor<2x10xf32>
module attributes {dist.mesh = #dist.mesh<dp = 2, tp = 2>} {
  func.func @uneven(%x: tensor<4x12xf32> {dist.sharding = #dist.sharding<[{dp}, {tp}]>})
      -> (tensor<4x10xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>}) {
    %q, %k, %v = graph.split %x {axis = 1 : i64, parts = 3 : i64, sizes = array<i64: 8, 2, 2>} : tensor<4x12xf32> -> tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2xf32>
    %c = graph.concat %k, %q {axis = 1 : i64} : tensor<4x2xf32>, tensor<4x8xf32> -> tensor<4x10xf32>
    return %c : tensor<4x10xf32>
  }
}
