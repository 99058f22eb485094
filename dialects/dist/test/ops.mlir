// RUN: dtc-opt %s | dtc-opt | FileCheck %s
// Mesh, sharding and every collective parse, verify and print back.

// CHECK: module attributes {dist.mesh = #dist.mesh<dp = 2, tp = 4>}
module attributes {dist.mesh = #dist.mesh<dp = 2, tp = 4>} {
  // CHECK-LABEL: func.func @collectives
  // CHECK-SAME: dist.sharding = #dist.sharding<[{dp}, {tp}]>
  func.func @collectives(%x: tensor<4x8xf32> {dist.sharding = #dist.sharding<[{dp}, {tp}]>},
                         %p: tensor<8xf32> {dist.sharding = #dist.sharding<[{}], sum = {dp, tp}>}) -> tensor<4x8xf32> {
    // CHECK: dist.all_reduce %{{.*}}, %{{.*}} over ["dp", "tp"] : tensor<8xf32>, tensor<4x8xf32> -> tensor<8xf32>, tensor<4x8xf32>
    %r:2 = dist.all_reduce %p, %x over ["dp", "tp"] : tensor<8xf32>, tensor<4x8xf32> -> tensor<8xf32>, tensor<4x8xf32>
    // CHECK: dist.all_gather %{{.*}} over ["tp"] {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x32xf32>
    %g = dist.all_gather %x over ["tp"] {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x32xf32>
    // CHECK: dist.reduce_scatter %{{.*}} over ["tp"] {dim = 1 : i64} : tensor<4x32xf32> -> tensor<4x8xf32>
    %s = dist.reduce_scatter %g over ["tp"] {dim = 1 : i64} : tensor<4x32xf32> -> tensor<4x8xf32>
    // CHECK: dist.all_to_all %{{.*}} over ["dp"] {concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x8xf32> -> tensor<8x4xf32>
    %a = dist.all_to_all %s over ["dp"] {split_dim = 1 : i64, concat_dim = 0 : i64} : tensor<4x8xf32> -> tensor<8x4xf32>
    // CHECK: dist.local_slice %{{.*}} over ["dp"] {dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
    %l = dist.local_slice %a over ["dp"] {dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
    // CHECK: dist.collective_broadcast %{{.*}} over ["tp"] {root = 3 : i64} : tensor<4x4xf32>
    %b = dist.collective_broadcast %l over ["tp"] {root = 3 : i64} : tensor<4x4xf32>
    // CHECK: dist.send %{{.*}} over ["dp"] {shift = 1 : i64, tag = 3 : i64} : tensor<4x4xf32>
    dist.send %b over ["dp"] {shift = 1 : i64, tag = 3 : i64} : tensor<4x4xf32>
    // CHECK: dist.recv over ["dp"] {shift = 1 : i64, tag = 3 : i64} : tensor<4x4xf32>
    %v = dist.recv over ["dp"] {shift = 1 : i64, tag = 3 : i64} : tensor<4x4xf32>
    // CHECK: dist.reshard %{{.*}} <[{tp}, {}]> : tensor<4x8xf32>
    %c = dist.reshard %x <[{tp}, {}]> : tensor<4x8xf32>
    return %c : tensor<4x8xf32>
  }
}
