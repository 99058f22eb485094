// RUN: dtc-opt %s --dtc-lower-to-kernels="epilogues=true" | FileCheck %s
// RUN: dtc-opt %s --dtc-lower-to-kernels="epilogues=true absorb-casts=false" | FileCheck %s --check-prefix=KEEP

// The residual add before an RMSNorm joins it; the sublayer's 16-bit output is read as stored.
// CHECK-LABEL: func.func @forward
// CHECK: %[[F:.*]]:3 = plan.kernel "add_rms_norm"(%arg0, %arg1, %arg2) {eps = 9.99999997E-7 : f32} : (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4xf32>)
// CHECK-NOT: "cast"
// CHECK-NOT: "add"
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2
// KEEP-LABEL: func.func @forward
// KEEP: %[[C:.*]] = plan.kernel "cast"(%arg1)
// KEEP: plan.kernel "add_rms_norm"(%arg0, %[[C]], %arg2)
func.func @forward(%x: tensor<4x8xf32>, %r: tensor<4x8xbf16>, %w: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4xf32>) {
  %c = graph.cast %r : tensor<4x8xbf16> -> tensor<4x8xf32>
  %s = graph.add %x, %c : tensor<4x8xf32>, tensor<4x8xf32>
  %y, %rstd = graph.rms_norm %s, %w {eps = 1.0e-6 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4xf32>)
  return %s, %y, %rstd : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4xf32>
}

// Backward: the q, k and v projections' 16-bit input gradients, widened and summed into dy, are
// the kernel's parts in the chain's order (whichever side of each add continues it); the
// residual gradient is added and the sum's one narrowing cast written by the kernel.
// CHECK-LABEL: func.func @backward
// CHECK: %[[G:.*]]:3 = plan.kernel "rms_norm_grad_add"(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6) {} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xbf16>)
// CHECK-NOT: "cast"
// CHECK-NOT: "add"
// CHECK: return %[[G]]#2, %[[G]]#1, %[[G]]#0
// KEEP-LABEL: func.func @backward
// KEEP-COUNT-3: plan.kernel "cast"
// KEEP: %[[G:.*]]:2 = plan.kernel "rms_norm_grad_add"
// KEEP-SAME: -> (tensor<4x8xf32>, tensor<8xf32>)
// KEEP: plan.kernel "cast"(%[[G]]#0)
func.func @backward(%d0: tensor<4x8xbf16>, %d1: tensor<4x8xbf16>, %d2: tensor<4x8xbf16>,
                    %x: tensor<4x8xf32>, %w: tensor<8xf32>, %rstd: tensor<4xf32>,
                    %dres: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<4x8xf32>) {
  %c0 = graph.cast %d0 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %c1 = graph.cast %d1 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %c2 = graph.cast %d2 : tensor<4x8xbf16> -> tensor<4x8xf32>
  %a = graph.add %c0, %c1 : tensor<4x8xf32>, tensor<4x8xf32>
  %dy = graph.add %c2, %a : tensor<4x8xf32>, tensor<4x8xf32>
  %dx, %dw = graph.rms_norm_grad %dy, %x, %w, %rstd : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %s = graph.add %dres, %dx : tensor<4x8xf32>, tensor<4x8xf32>
  %n = graph.cast %s : tensor<4x8xf32> -> tensor<4x8xbf16>
  return %n, %dw, %s : tensor<4x8xbf16>, tensor<8xf32>, tensor<4x8xf32>
}

// Five parts: the kernel reads four, the first the sum of the chain's first two.
// CHECK-LABEL: func.func @long
// CHECK: %[[A:.*]] = plan.kernel "add"(%arg0, %arg1)
// CHECK: plan.kernel "rms_norm_grad_add"(%[[A]], %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8) {} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NOT: "add"
func.func @long(%p1: tensor<4x8xf32>, %p2: tensor<4x8xf32>, %p3: tensor<4x8xf32>, %p4: tensor<4x8xf32>,
                %p5: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>, %rstd: tensor<4xf32>,
                %dres: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %a = graph.add %p1, %p2 : tensor<4x8xf32>, tensor<4x8xf32>
  %b = graph.add %a, %p3 : tensor<4x8xf32>, tensor<4x8xf32>
  %c = graph.add %b, %p4 : tensor<4x8xf32>, tensor<4x8xf32>
  %dy = graph.add %c, %p5 : tensor<4x8xf32>, tensor<4x8xf32>
  %dx, %dw = graph.rms_norm_grad %dy, %x, %w, %rstd : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  %s = graph.add %dx, %dres : tensor<4x8xf32>, tensor<4x8xf32>
  return %s, %dw : tensor<4x8xf32>, tensor<8xf32>
}
