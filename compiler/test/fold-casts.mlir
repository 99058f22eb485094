// RUN: dtc-opt %s --dtc-fold-casts | FileCheck %s

// Attention's head split under bf16: the f32 projection is cast once, and the split, reshape
// and transpose move bf16; the attention output goes back through transpose and reshape in
// bf16 to the next contraction, the widening and narrowing casts in between cancelled.
// CHECK-LABEL: func.func @heads
// CHECK: %[[C:.*]] = graph.cast %arg0 : tensor<2x8x96xf32> -> tensor<2x8x96xbf16>
// CHECK: %[[S:.*]]:3 = graph.split %[[C]] {axis = 2 : i64, parts = 3 : i64} : tensor<2x8x96xbf16>
// CHECK: %[[R:.*]] = graph.reshape %[[S]]#0 : tensor<2x8x32xbf16> -> tensor<2x8x2x16xbf16>
// CHECK: %[[Q:.*]] = graph.transpose %[[R]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x16xbf16> -> tensor<2x2x8x16xbf16>
// CHECK: %[[O:.*]], %{{.*}} = graph.causal_attention %[[Q]]
// CHECK: %[[T:.*]] = graph.transpose %[[O]] {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x8x16xbf16> -> tensor<2x8x2x16xbf16>
// CHECK: %[[M:.*]] = graph.reshape %[[T]] : tensor<2x8x2x16xbf16> -> tensor<2x8x32xbf16>
// CHECK: graph.linear %[[M]], %arg1
// CHECK-NOT: graph.cast
func.func @heads(%qkv: tensor<2x8x96xf32>, %w: tensor<32x32xbf16>) -> tensor<2x8x32xbf16> {
  %s:3 = graph.split %qkv {axis = 2 : i64, parts = 3 : i64} : tensor<2x8x96xf32> -> tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>
  %r = graph.reshape %s#0 : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
  %t = graph.transpose %r {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %q = graph.cast %t : tensor<2x2x8x16xf32> -> tensor<2x2x8x16xbf16>
  %r1 = graph.reshape %s#1 : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
  %t1 = graph.transpose %r1 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %k = graph.cast %t1 : tensor<2x2x8x16xf32> -> tensor<2x2x8x16xbf16>
  %r2 = graph.reshape %s#2 : tensor<2x8x32xf32> -> tensor<2x8x2x16xf32>
  %t2 = graph.transpose %r2 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %v = graph.cast %t2 : tensor<2x2x8x16xf32> -> tensor<2x2x8x16xbf16>
  %o, %lse = graph.causal_attention %q, %k, %v {scale = 0.25 : f32} : (tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16>) -> (tensor<2x2x8x16xbf16>, tensor<2x2x8xf32>)
  %wide = graph.cast %o : tensor<2x2x8x16xbf16> -> tensor<2x2x8x16xf32>
  %back = graph.transpose %wide {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x8x16xf32> -> tensor<2x8x2x16xf32>
  %merged = graph.reshape %back : tensor<2x8x2x16xf32> -> tensor<2x8x32xf32>
  %low = graph.cast %merged : tensor<2x8x32xf32> -> tensor<2x8x32xbf16>
  %y = graph.linear %low, %w : tensor<2x8x32xbf16>, tensor<32x32xbf16> -> tensor<2x8x32xbf16>
  return %y : tensor<2x8x32xbf16>
}

// The backward's head merge: concat of widened gradients becomes a widened concat; the f32
// value stays for its other use (the bias gradient) and the narrowing cast cancels.
// CHECK-LABEL: func.func @merge
// CHECK: %[[C:.*]] = graph.concat %arg0, %arg1 {axis = 1 : i64} : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x16xf16>
// CHECK: %[[W:.*]] = graph.cast %[[C]] : tensor<4x16xf16> -> tensor<4x16xf32>
// CHECK: %[[B:.*]] = graph.reduce_sum %[[W]]
// CHECK: return %[[B]], %[[C]]
func.func @merge(%a: tensor<4x8xf16>, %b: tensor<4x8xf16>) -> (tensor<16xf32>, tensor<4x16xf16>) {
  %wa = graph.cast %a : tensor<4x8xf16> -> tensor<4x8xf32>
  %wb = graph.cast %b : tensor<4x8xf16> -> tensor<4x8xf32>
  %c = graph.concat %wa, %wb {axis = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x16xf32>
  %sum = graph.reduce_sum %c {axes = array<i64: 0>} : tensor<4x16xf32> -> tensor<16xf32>
  %n = graph.cast %c : tensor<4x16xf32> -> tensor<4x16xf16>
  return %sum, %n : tensor<16xf32>, tensor<4x16xf16>
}

// Not exact, so left alone: f32 → bf16 → f32 rounds, and a transpose whose f32 result is used
// elsewhere keeps it.
// CHECK-LABEL: func.func @kept
// CHECK: graph.cast %arg0 : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: graph.cast %{{.*}} : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[T:.*]] = graph.transpose %arg0 {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK: graph.cast %[[T]] : tensor<8x4xf32> -> tensor<8x4xbf16>
func.func @kept(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xbf16>) {
  %l = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %r = graph.cast %l : tensor<4x8xbf16> -> tensor<4x8xf32>
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %c = graph.cast %t : tensor<8x4xf32> -> tensor<8x4xbf16>
  return %r, %t, %c : tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xbf16>
}

// A LayerNorm whose f32 output only feeds a narrowing cast writes the 16-bit values itself (it
// rounds as the cast did); mean and rstd stay f32. (Fused linear epilogues do the same as they
// are lowered: epilogue-fusion.mlir.)
// CHECK-LABEL: func.func @producers
// CHECK: %[[Y:.*]], %{{.*}}, %{{.*}} = graph.layer_norm %arg0, %arg1, %arg2 {eps = 9.99999974E-6 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4xf32>, tensor<4xf32>)
// CHECK: return %[[Y]]
func.func @producers(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %y, %mean, %rstd = graph.layer_norm %x, %g, %b {eps = 1.0e-5 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %yl = graph.cast %y : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %yl : tensor<4x8xbf16>
}

// A parameter (a function argument: it does not change within the step) cast to bf16 twice,
// as two micro-batches do, is cast once: both products read the first copy.
// CHECK-LABEL: func.func @shared_weight
// CHECK: %[[W:.*]] = graph.cast %arg0 : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK: graph.linear %arg1, %[[W]]
// CHECK-NOT: graph.cast %arg0
// CHECK: graph.linear %arg2, %[[W]]
func.func @shared_weight(%w: tensor<4x4xf32>, %a: tensor<2x4xbf16>, %b: tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>) {
  %w0 = graph.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
  %y0 = graph.linear %a, %w0 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  %w1 = graph.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
  %y1 = graph.linear %b, %w1 : tensor<2x4xbf16>, tensor<4x4xbf16> -> tensor<2x4xbf16>
  return %y0, %y1 : tensor<2x4xbf16>, tensor<2x4xbf16>
}
