// RUN: not dtc-opt %s 2>&1 | FileCheck %s
// q, k and v of causal_attention share one element type (the kernels take one).
// CHECK: causal_attention: q, k and v of different element types
func.func @f(%q: tensor<2x8x16xbf16>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>) {
  %o, %lse = graph.causal_attention %q, %k, %v {scale = 0.25 : f32} : (tensor<2x8x16xbf16>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xbf16>, tensor<2x8xf32>)
  return
}
