// RUN: dtc-opt %s --dtc-sync-batch-norm | FileCheck %s
// RUN: dtc-opt %s --dtc-sync-batch-norm --dtc-sharding-propagation --dtc-partition | FileCheck %s --check-prefix=DP

// BatchNorm cut at its per-channel sums (count = N·H·W = 4·3·3 = 36).
// CHECK-LABEL: func.func @bn
// CHECK: %[[S:.*]] = graph.batch_norm_sum %arg0 : tensor<4x2x3x3xf32> -> tensor<2xf32>
// CHECK: %[[Q:.*]] = graph.batch_norm_centered_squares %arg0, %[[S]] {count = 36 : i64}
// CHECK: %[[Y:.*]], %[[M:.*]], %[[R:.*]], %{{.*}}, %{{.*}} = graph.batch_norm_normalize %arg0, %[[S]], %[[Q]], %arg1, %arg2, %arg3, %arg4 {count = 36 : i64, eps = 9.99999974E-6 : f32, momentum = 1.000000e-01 : f32}
// CHECK: %[[DB:.*]], %[[DW:.*]] = graph.batch_norm_grad_sums %arg5, %arg0, %[[M]], %[[R]]
// CHECK: %[[DX:.*]] = graph.batch_norm_grad_input %arg5, %arg0, %arg1, %[[M]], %[[R]], %[[DB]], %[[DW]] {count = 36 : i64}
// CHECK: return %[[Y]], %[[DX]], %[[DW]], %[[DB]]
// CHECK-NOT: batch_norm_train

// Split over the batch: each sum is partial and all-reduced (2 floats each), the statistics
// and everything per sample stay local.
// DP-LABEL: func.func @bn
// DP-SAME: %arg0: tensor<2x2x3x3xf32>
// DP: %[[S:.*]] = graph.batch_norm_sum %arg0 {{.*}}sum = {dp}
// DP-NEXT: %[[SR:.*]] = dist.all_reduce %[[S]] over ["dp"] : tensor<2xf32>
// DP: %[[Q:.*]] = graph.batch_norm_centered_squares %arg0, %[[SR]]
// DP-NEXT: %[[QR:.*]] = dist.all_reduce %[[Q]] over ["dp"] : tensor<2xf32>
// DP: graph.batch_norm_normalize %arg0, %[[SR]], %[[QR]]
// DP-NOT: dist.all_gather
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @bn(%x: tensor<4x2x3x3xf32> {dist.sharding = #dist.sharding<[{dp}, {}, {}, {}]>},
                %w: tensor<2xf32> {dist.sharding = #dist.sharding<[{}]>},
                %b: tensor<2xf32> {dist.sharding = #dist.sharding<[{}]>},
                %rm: tensor<2xf32> {dist.sharding = #dist.sharding<[{}]>},
                %rv: tensor<2xf32> {dist.sharding = #dist.sharding<[{}]>},
                %dy: tensor<4x2x3x3xf32> {dist.sharding = #dist.sharding<[{dp}, {}, {}, {}]>})
      -> (tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>, tensor<2xf32> {dist.sharding = #dist.sharding<[{}]>},
          tensor<2xf32> {dist.sharding = #dist.sharding<[{}]>}) {
    %y, %mean, %rstd, %nrm, %nrv = graph.batch_norm_train %x, %w, %b, %rm, %rv {eps = 1.0e-5 : f32, momentum = 0.1 : f32}
        : (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
        -> (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
    %dx, %dw, %db = graph.batch_norm_train_grad %dy, %x, %w, %mean, %rstd
        : (tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)
        -> (tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>)
    return %y, %dx, %dw, %db : tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>
  }
}
