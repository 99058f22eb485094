// RUN: dtc-opt %s --dtc-fold-casts | FileCheck %s

// Ops with 16-bit storage (LowPrecisionStorageOpInterface) take mixed precision's casts in: a
// Llama MLP's gate and up come out of their bf16 GEMMs, SwiGLU reads them as they are and writes
// the down projection's bf16 input itself.
// CHECK-LABEL: func.func @mlp
// CHECK-NOT: graph.cast
// CHECK: graph.swiglu %arg0, %arg1 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NOT: graph.cast
func.func @mlp(%gate: tensor<4x8xbf16>, %up: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %g = graph.cast %gate : tensor<4x8xbf16> -> tensor<4x8xf32>
  %u = graph.cast %up : tensor<4x8xbf16> -> tensor<4x8xf32>
  %y = graph.swiglu %g, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = graph.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %n : tensor<4x8xbf16>
}

// RMSNorm's y read by three projections, each through its own cast: the norm writes bf16 once,
// every reader takes it. Its x (the f32 residual stream) and rstd stay f32.
// CHECK-LABEL: func.func @norm
// CHECK: %[[Y:.*]], %{{.*}} = graph.rms_norm %arg0, %arg1 {eps = 9.99999997E-7 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4xf32>)
// CHECK-NOT: graph.cast
// CHECK: return %[[Y]], %[[Y]], %[[Y]]
func.func @norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %y, %rstd = graph.rms_norm %x, %w {eps = 1.0e-6 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  %q = graph.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  %k = graph.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  %v = graph.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %q, %k, %v : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>
}

// A result also read in f32 keeps its type (the cast stays); a widening cast read by rotary and
// by another op stays for the other, rotary reading the bf16 value; the tables stay f32.
// CHECK-LABEL: func.func @kept
// CHECK: %[[W:.*]] = graph.cast %arg0 : tensor<2x4x6xbf16> -> tensor<2x4x6xf32>
// CHECK: %[[R:.*]] = graph.rotary %arg0, %arg1, %arg2 : tensor<2x4x6xbf16>, tensor<4x6xf32>, tensor<4x6xf32> -> tensor<2x4x6xf32>
// CHECK: %[[N:.*]] = graph.cast %[[R]] : tensor<2x4x6xf32> -> tensor<2x4x6xbf16>
// CHECK: return %[[N]], %[[R]], %[[W]]
func.func @kept(%x: tensor<2x4x6xbf16>, %c: tensor<4x6xf32>, %s: tensor<4x6xf32>) -> (tensor<2x4x6xbf16>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) {
  %w = graph.cast %x : tensor<2x4x6xbf16> -> tensor<2x4x6xf32>
  %r = graph.rotary %w, %c, %s : tensor<2x4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32> -> tensor<2x4x6xf32>
  %n = graph.cast %r : tensor<2x4x6xf32> -> tensor<2x4x6xbf16>
  return %n, %r, %w : tensor<2x4x6xbf16>, tensor<2x4x6xf32>, tensor<2x4x6xf32>
}

// Two 16-bit types never meet in one op: an f16 gate beside a bf16 up keeps the second cast.
// CHECK-LABEL: func.func @mixed
// CHECK: graph.cast %arg1
// CHECK: graph.swiglu %arg0, %{{.*}} : (tensor<4x8xf16>, tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @mixed(%gate: tensor<4x8xf16>, %up: tensor<4x8xbf16>) -> tensor<4x8xf32> {
  %g = graph.cast %gate : tensor<4x8xf16> -> tensor<4x8xf32>
  %u = graph.cast %up : tensor<4x8xbf16> -> tensor<4x8xf32>
  %y = graph.swiglu %g, %u : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
