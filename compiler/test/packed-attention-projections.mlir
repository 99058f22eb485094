// RUN: dtc-opt %s --dtc-lower-to-kernels | FileCheck %s
// RUN: dtc-opt %s --dtc-lower-to-kernels="packed-attention=false" | FileCheck %s --check-prefix=APART

// Llama's attention: q, k and v from three projections (k and v of 2 heads serving 4 query
// heads), rotary embeddings on q and k between the projection and the transpose. Attention reads
// the projections' rows, the rotary steps run on them, and no transpose is left, forward or
// backward.
// CHECK-LABEL: func.func @llama
// CHECK: %[[QH:.*]] = plan.kernel "reshape"(%arg0) {} : (tensor<2x6x32xbf16>) -> tensor<2x6x4x8xbf16>
// CHECK: %[[QR:.*]] = plan.kernel "rotary"(%[[QH]], %arg3, %arg4) {seq_major = 1 : i64} : (tensor<2x6x4x8xbf16>, tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<2x6x4x8xbf16>
// CHECK: %[[Q:.*]] = plan.kernel "reshape"(%[[QR]]) {} : (tensor<2x6x4x8xbf16>) -> tensor<2x6x32xbf16>
// CHECK: %[[KR:.*]] = plan.kernel "rotary"({{.*}}) {seq_major = 1 : i64} : (tensor<2x6x2x8xbf16>, tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<2x6x2x8xbf16>
// CHECK: %[[K:.*]] = plan.kernel "reshape"(%[[KR]]) {} : (tensor<2x6x2x8xbf16>) -> tensor<2x6x16xbf16>
// CHECK: %[[A:.*]]:2 = plan.kernel "causal_attention_qkv"(%[[Q]], %[[K]], %arg2) {heads = 4 : i64, scale = 0.353553385 : f32} : (tensor<2x6x32xbf16>, tensor<2x6x16xbf16>, tensor<2x6x16xbf16>) -> (tensor<2x6x32xbf16>, tensor<2x4x6xf32>)
// CHECK: %[[G:.*]]:3 = plan.kernel "causal_attention_qkv_grad"(%arg5, %[[Q]], %[[K]], %arg2, %[[A]]#0, %[[A]]#1) {heads = 4 : i64, scale = 0.353553385 : f32} : (tensor<2x6x32xbf16>, tensor<2x6x32xbf16>, tensor<2x6x16xbf16>, tensor<2x6x16xbf16>, tensor<2x6x32xbf16>, tensor<2x4x6xf32>) -> (tensor<2x6x32xbf16>, tensor<2x6x16xbf16>, tensor<2x6x16xbf16>)
// CHECK: plan.kernel "rotary_grad"({{.*}}) {seq_major = 1 : i64} : (tensor<2x6x4x8xbf16>
// CHECK: plan.kernel "rotary_grad"({{.*}}) {seq_major = 1 : i64} : (tensor<2x6x2x8xbf16>
// CHECK-NOT: "transpose"
// CHECK: return %[[A]]#0
// APART-LABEL: func.func @llama
// APART: plan.kernel "transpose"
// APART: plan.kernel "rotary"({{.*}}) {} : (tensor<2x4x6x8xbf16>
// APART: plan.kernel "causal_attention"(
func.func @llama(%q: tensor<2x6x32xbf16>, %k: tensor<2x6x16xbf16>, %v: tensor<2x6x16xbf16>,
                 %cos: tensor<6x8xf32>, %sin: tensor<6x8xf32>, %dctx: tensor<2x6x32xbf16>)
    -> (tensor<2x6x32xbf16>, tensor<2x6x32xbf16>, tensor<2x6x16xbf16>, tensor<2x6x16xbf16>) {
  %q4 = graph.reshape %q : tensor<2x6x32xbf16> -> tensor<2x6x4x8xbf16>
  %qh = graph.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x4x8xbf16> -> tensor<2x4x6x8xbf16>
  %qr = graph.rotary %qh, %cos, %sin : tensor<2x4x6x8xbf16>, tensor<6x8xf32>, tensor<6x8xf32> -> tensor<2x4x6x8xbf16>
  %k4 = graph.reshape %k : tensor<2x6x16xbf16> -> tensor<2x6x2x8xbf16>
  %kh = graph.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x2x8xbf16> -> tensor<2x2x6x8xbf16>
  %kr = graph.rotary %kh, %cos, %sin : tensor<2x2x6x8xbf16>, tensor<6x8xf32>, tensor<6x8xf32> -> tensor<2x2x6x8xbf16>
  %v4 = graph.reshape %v : tensor<2x6x16xbf16> -> tensor<2x6x2x8xbf16>
  %vh = graph.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x2x8xbf16> -> tensor<2x2x6x8xbf16>
  %out, %lse = graph.causal_attention %qr, %kr, %vh {scale = 0.353553385 : f32} : (tensor<2x4x6x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x2x6x8xbf16>) -> (tensor<2x4x6x8xbf16>, tensor<2x4x6xf32>)
  %ot = graph.transpose %out {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x6x8xbf16> -> tensor<2x6x4x8xbf16>
  %ctx = graph.reshape %ot : tensor<2x6x4x8xbf16> -> tensor<2x6x32xbf16>
  %d4 = graph.reshape %dctx : tensor<2x6x32xbf16> -> tensor<2x6x4x8xbf16>
  %dh = graph.transpose %d4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x4x8xbf16> -> tensor<2x4x6x8xbf16>
  %dq, %dk, %dv = graph.causal_attention_grad %dh, %qr, %kr, %vh, %out, %lse {scale = 0.353553385 : f32} : (tensor<2x4x6x8xbf16>, tensor<2x4x6x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x4x6x8xbf16>, tensor<2x4x6xf32>) -> (tensor<2x4x6x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x2x6x8xbf16>)
  %dqr = graph.rotary_grad %dq, %cos, %sin : tensor<2x4x6x8xbf16>, tensor<6x8xf32>, tensor<6x8xf32> -> tensor<2x4x6x8xbf16>
  %dqt = graph.transpose %dqr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x6x8xbf16> -> tensor<2x6x4x8xbf16>
  %dqm = graph.reshape %dqt : tensor<2x6x4x8xbf16> -> tensor<2x6x32xbf16>
  %dkr = graph.rotary_grad %dk, %cos, %sin : tensor<2x2x6x8xbf16>, tensor<6x8xf32>, tensor<6x8xf32> -> tensor<2x2x6x8xbf16>
  %dkt = graph.transpose %dkr {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x6x8xbf16> -> tensor<2x6x2x8xbf16>
  %dkm = graph.reshape %dkt : tensor<2x6x2x8xbf16> -> tensor<2x6x16xbf16>
  %dvt = graph.transpose %dv {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x6x8xbf16> -> tensor<2x6x2x8xbf16>
  %dvm = graph.reshape %dvt : tensor<2x6x2x8xbf16> -> tensor<2x6x16xbf16>
  return %ctx, %dqm, %dkm, %dvm : tensor<2x6x32xbf16>, tensor<2x6x32xbf16>, tensor<2x6x16xbf16>, tensor<2x6x16xbf16>
}

// Another reader of the rotated heads keeps them, and the layout ops with them.
// CHECK-LABEL: func.func @read_elsewhere
// CHECK: plan.kernel "transpose"
// CHECK: plan.kernel "causal_attention"(
func.func @read_elsewhere(%q: tensor<2x6x32xf32>, %k: tensor<2x6x32xf32>, %v: tensor<2x6x32xf32>,
                          %cos: tensor<6x8xf32>, %sin: tensor<6x8xf32>) -> (tensor<2x6x32xf32>, tensor<2x4x6x8xf32>) {
  %q4 = graph.reshape %q : tensor<2x6x32xf32> -> tensor<2x6x4x8xf32>
  %qh = graph.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x4x8xf32> -> tensor<2x4x6x8xf32>
  %qr = graph.rotary %qh, %cos, %sin : tensor<2x4x6x8xf32>, tensor<6x8xf32>, tensor<6x8xf32> -> tensor<2x4x6x8xf32>
  %k4 = graph.reshape %k : tensor<2x6x32xf32> -> tensor<2x6x4x8xf32>
  %kh = graph.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x4x8xf32> -> tensor<2x4x6x8xf32>
  %v4 = graph.reshape %v : tensor<2x6x32xf32> -> tensor<2x6x4x8xf32>
  %vh = graph.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x6x4x8xf32> -> tensor<2x4x6x8xf32>
  %out, %lse = graph.causal_attention %qr, %kh, %vh {scale = 0.353553385 : f32} : (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> (tensor<2x4x6x8xf32>, tensor<2x4x6xf32>)
  %ot = graph.transpose %out {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x6x8xf32> -> tensor<2x6x4x8xf32>
  %ctx = graph.reshape %ot : tensor<2x6x4x8xf32> -> tensor<2x6x32xf32>
  return %ctx, %qr : tensor<2x6x32xf32>, tensor<2x4x6x8xf32>
}
