// RUN: dtc-opt %s --dtc-sharding-propagation --dtc-partition --dtc-lower-to-kernels | FileCheck %s

// dtc-partition places each device's block of a dropout's tensor in the whole (its global shape
// and the mesh axes splitting each dimension), and dtc-lower-to-kernels gives the function one
// `rng` setting, the last operand of every dropout call.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %arg2: tensor<2xi64> {graph.hyper = "rng"}
// CHECK: plan.kernel "dropout"(%{{.*}}, %arg2) {global_shape = array<i64: 8, 6>, key = 11 : i64, micro_batch = 0 : i64, ratio = 1.000000e-01 : f32, split_axes = ["dp", "tp"], split_counts = array<i64: 1, 1>} {{.*}} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<4x3xf32>
// CHECK: plan.kernel "dropout"(%{{.*}}, %arg2) {global_shape = array<i64: 8, 6>, key = 12 : i64, micro_batch = 1 : i64, ratio = 2.000000e-01 : f32, split_axes = ["dp"], split_counts = array<i64: 1, 0>} {{.*}} : (tensor<4x6xf32>, tensor<2xi64>) -> tensor<4x6xf32>
module attributes {dist.mesh = #dist.mesh<dp = 2, tp = 2>} {
  func.func @step(%x: tensor<8x6xf32> {dist.sharding = #dist.sharding<[{dp}, {tp}]>},
                  %y: tensor<8x6xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>})
      -> (tensor<8x6xf32> {dist.sharding = #dist.sharding<[{dp}, {tp}]>},
          tensor<8x6xf32> {dist.sharding = #dist.sharding<[{dp}, {}]>}) {
    %a = graph.dropout %x {ratio = 0.1 : f32, key = 11 : i64} : tensor<8x6xf32>
    %b = graph.dropout %y {ratio = 0.2 : f32, key = 12 : i64, micro_batch = 1 : i64} : tensor<8x6xf32>
    return %a, %b : tensor<8x6xf32>, tensor<8x6xf32>
  }
}
