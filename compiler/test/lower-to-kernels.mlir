// RUN: dtc-opt %s --dtc-lower-to-kernels -split-input-file -verify-diagnostics | FileCheck %s

// Every op becomes the call of its runtime kernel: attributes are the kernel's parameters, the
// compiler's marks stay on the call, locations are kept.
// CHECK-LABEL: func.func @step
func.func @step(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>) -> tensor<4x3xf32> {
  // CHECK: %[[Y:.*]] = plan.kernel "linear"(%arg0, %arg1) {} {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x3xf32>
  %0 = graph.linear %x, %w {dist.stage = 1 : i64} : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x3xf32>
  // CHECK: plan.kernel "gelu"(%[[Y]]) {approximate_tanh = true} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = graph.gelu %0 {approximate_tanh = true} : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// An op no runtime kernel runs (a reshard the partitioner should have resolved) is an error.
module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @unresolved(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    // expected-error @+1 {{has no runtime kernel (runtime/ops/kernels.def) to run it}}
    %0 = dist.reshard %x <[{dp}, {}]> : tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
