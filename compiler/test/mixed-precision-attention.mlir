// RUN: dtc-opt %s --dtc-mixed-precision="precision=bf16" | FileCheck %s
// RUN: dtc-opt %s --dtc-mixed-precision="precision=fp16" --dtc-autodiff | FileCheck %s --check-prefix=GRAD

// Fused attention is a pair of contractions: q, k and v go in as bf16, the output comes out
// bf16 and is cast back; the log-sum-exp stays f32.
// CHECK: %[[Q:.*]] = graph.cast %arg0 : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
// CHECK: %[[K:.*]] = graph.cast %arg1 : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
// CHECK: %[[V:.*]] = graph.cast %arg2 : tensor<2x8x16xf32> -> tensor<2x8x16xbf16>
// CHECK: %[[O:.*]], %{{.*}} = graph.causal_attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32} : (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x8x16xbf16>) -> (tensor<2x8x16xbf16>, tensor<2x8xf32>)
// CHECK: %[[F:.*]] = graph.cast %[[O]] : tensor<2x8x16xbf16> -> tensor<2x8x16xf32>
// CHECK: graph.mse %[[F]]

// Backward in fp16: the output's gradient is rounded to f16, the three input gradients come out
// f16 and are widened for the f32 parameters.
// GRAD-LABEL: func.func @grad
// GRAD: graph.mse_grad
// GRAD: %[[DO:.*]] = graph.cast %{{.*}} : tensor<2x8x16xf32> -> tensor<2x8x16xf16>
// GRAD: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = graph.causal_attention_grad %[[DO]], {{.*}} : (tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<2x8xf32>) -> (tensor<2x8x16xf16>, tensor<2x8x16xf16>, tensor<2x8x16xf16>)
// GRAD-DAG: graph.cast %[[DQ]] : tensor<2x8x16xf16> -> tensor<2x8x16xf32>
// GRAD-DAG: graph.cast %[[DK]] : tensor<2x8x16xf16> -> tensor<2x8x16xf32>
// GRAD-DAG: graph.cast %[[DV]] : tensor<2x8x16xf16> -> tensor<2x8x16xf32>
func.func @forward(%q: tensor<2x8x16xf32> {graph.param = "q", graph.trainable},
                   %k: tensor<2x8x16xf32> {graph.param = "k", graph.trainable},
                   %v: tensor<2x8x16xf32> {graph.param = "v", graph.trainable},
                   %y: tensor<2x8x16xf32> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %o, %lse = graph.causal_attention %q, %k, %v {scale = 0.25 : f32} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8xf32>)
  %l = graph.mse %o, %y : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

