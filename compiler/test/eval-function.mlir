// RUN: dtc-opt %s --dtc-eval-function | FileCheck %s --check-prefix=EVAL
// @forward becomes @eval, the model in evaluation: dropout is the identity.
// EVAL-LABEL: func.func @eval
// EVAL-NEXT: %[[H:.*]] = graph.relu %arg0
// EVAL-NEXT: return %[[H]]
module {
  func.func @forward(%x: tensor<8x6xf32> {graph.data = "x"}) -> (tensor<8x6xf32> {graph.output = "y"}) {
    %h = graph.relu %x : tensor<8x6xf32>
    %d = graph.dropout %h {ratio = 0.5 : f32, key = 3 : i64} : tensor<8x6xf32>
    return %d : tensor<8x6xf32>
  }
}
