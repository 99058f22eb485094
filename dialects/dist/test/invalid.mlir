// RUN: dtc-opt %s -split-input-file -verify-diagnostics

module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{mesh has no axis 'tp'}}
    %r = dist.all_reduce %x over ["tp"] : tensor<4xf32> -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 2>} {
  func.func @gather_shape(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{result type 'tensor<4xf32>' does not match input 'tensor<4xf32>' over 2 devices}}
    %r = dist.all_gather %x over ["dp"] {dim = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

module attributes {dist.mesh = #dist.mesh<dp = 4>} {
  func.func @uneven_scatter(%x: tensor<6xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{dimension 0 of size 6 does not divide over 4 devices}}
    %r = dist.reduce_scatter %x over ["dp"] {dim = 0 : i64} : tensor<6xf32> -> tensor<1xf32>
    return %r : tensor<1xf32>
  }
}

// -----

func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs a module with a `dist.mesh` attribute}}
  %r = dist.all_reduce %x over ["dp"] : tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// expected-error @+1 {{sharding: mesh axis 'dp' used twice}}
func.func private @twice(tensor<4x4xf32> {dist.sharding = #dist.sharding<[{dp}, {dp}]>})

// -----

// expected-error @+1 {{mesh: axis 'dp' named twice}}
module attributes {dist.mesh = #dist.mesh<dp = 2, dp = 2>} {}
