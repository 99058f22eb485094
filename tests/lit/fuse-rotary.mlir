// dtc-fuse-rotary: x·cos + concat(−x₂, x₁)·sin becomes one rotary op where nothing trains the
// tables (the HF export's form: two splits of x), and stays spelled out where cos is trained.
// RUN: dtc-opt --dtc-fuse-rotary %s | FileCheck %s

// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = graph.rotary %arg0, %arg1, %arg2 : tensor<2x3x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
// CHECK-NOT: graph.split
// CHECK-NOT: graph.concat
// CHECK: graph.split %[[Y]]
// CHECK: graph.concat
module attributes {graph.batch_size = 2 : i64} {
func.func @forward(%arg0: tensor<2x3x4x8xf32> {graph.param = "x", graph.trainable},
                   %arg1: tensor<1x1x4x8xf32> {graph.param = "cos"},
                   %arg2: tensor<1x1x4x8xf32> {graph.param = "sin"},
                   %arg3: tensor<1x1x4x8xf32> {graph.param = "trained_cos", graph.trainable})
    -> (tensor<f32> {graph.output = "loss"}) {
  %c = graph.mul %arg0, %arg1 : tensor<2x3x4x8xf32>, tensor<1x1x4x8xf32>
  %a:2 = graph.split %arg0 {axis = 3 : i64, parts = 2 : i64} : tensor<2x3x4x8xf32> -> tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %b:2 = graph.split %arg0 {axis = 3 : i64, parts = 2 : i64} : tensor<2x3x4x8xf32> -> tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %n = graph.scale %b#1 {factor = -1.0 : f32} : tensor<2x3x4x4xf32>
  %r = graph.concat %n, %a#0 {axis = 3 : i64} : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32> -> tensor<2x3x4x8xf32>
  %s = graph.mul %r, %arg2 : tensor<2x3x4x8xf32>, tensor<1x1x4x8xf32>
  %y = graph.add %c, %s : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>
  %c2 = graph.mul %y, %arg3 : tensor<2x3x4x8xf32>, tensor<1x1x4x8xf32>
  %t:2 = graph.split %y {axis = 3 : i64, parts = 2 : i64} : tensor<2x3x4x8xf32> -> tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %n2 = graph.scale %t#1 {factor = -1.0 : f32} : tensor<2x3x4x4xf32>
  %r2 = graph.concat %n2, %t#0 {axis = 3 : i64} : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32> -> tensor<2x3x4x8xf32>
  %s2 = graph.mul %r2, %arg2 : tensor<2x3x4x8xf32>, tensor<1x1x4x8xf32>
  %y2 = graph.add %c2, %s2 : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>
  %loss = graph.reduce_sum %y2 {axes = array<i64: 0, 1, 2, 3>} : tensor<2x3x4x8xf32> -> tensor<f32>
  return %loss : tensor<f32>
}
}
