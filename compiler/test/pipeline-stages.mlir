// RUN: dtc-opt %s --dtc-pipeline-stages="stages=2 micro-batches=2" | FileCheck %s
// RUN: dtc-opt %s --dtc-pipeline-stages="stages=2 cuts=fc2" | FileCheck %s --check-prefix=USER
// RUN: dtc-opt %s --dtc-pipeline-stages="stages=2 micro-batches=2" --dtc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: not dtc-opt %s --dtc-pipeline-stages="stages=4" 2>&1 | FileCheck %s --check-prefix=MANY
// RUN: not dtc-opt %s --dtc-pipeline-stages="stages=2 cuts=nope" 2>&1 | FileCheck %s --check-prefix=NONODE
// RUN: not dtc-opt %s --dtc-pipeline-stages="stages=2 schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: not dtc-opt %s --dtc-pipeline-stages="stages=2 schedule=interleaved virtual-stages=2 micro-batches=3" 2>&1 | FileCheck %s --check-prefix=INTER

// Three linear layers: the 64x64 one costs as much as the other two together, so the balanced
// cut puts fc0 with fc1 and fc2 alone on stage 1. Cuts fall between nodes where one tensor
// crosses (after relu1, not between fc2's matmul and its bias). Parameters follow their users.
// CHECK: module attributes {dist.pipeline = {axis = "pp", micro_batches = 2 : i64, schedule = "1f1b", stages = 2 : i64, virtual_stages = 1 : i64}}
// CHECK: %arg0: tensor<32x16xf32> {dist.stage = 0 : i64, graph.param = "fc0.weight"
// CHECK-SAME: %arg1: tensor<32x32xf32> {dist.stage = 0 : i64, graph.param = "fc1.weight"
// CHECK-SAME: %arg2: tensor<64x32xf32> {dist.stage = 1 : i64, graph.param = "fc2.weight"
// CHECK-SAME: %arg3: tensor<64xf32> {dist.stage = 1 : i64, graph.param = "fc2.bias"
// CHECK: graph.matmul {{.*}}dist.stage = 0
// CHECK: graph.relu {{.*}}dist.stage = 0
// CHECK: graph.matmul {{.*}}dist.stage = 0
// CHECK: graph.relu {{.*}}dist.stage = 0
// CHECK: graph.matmul {{.*}}dist.stage = 1
// CHECK: graph.add {{.*}}dist.stage = 1
// CHECK: graph.softmax_cross_entropy {{.*}}dist.stage = 1

// A user cut before node fc2 gives the same stages.
// USER: %arg1: tensor<32x32xf32> {dist.stage = 0 : i64
// USER: graph.relu {{.*}}dist.stage = 0
// USER: graph.relu {{.*}}dist.stage = 0
// USER: graph.matmul {{.*}}dist.stage = 1

// Gradient ops carry their forward op's stage and the backward mark.
// GRAD-LABEL: func.func @grad
// GRAD: graph.softmax_cross_entropy_grad {{.*}}dist.backward, dist.stage = 1
// GRAD: graph.relu_grad {{.*}}dist.backward, dist.stage = 0

// Four stages need four layers with parameters between which the model can be cut.
// MANY: cannot cut the model into 4 pipeline stages: it has 3 layers with parameters between which it can be cut
// NONODE: --stage-cuts: the model has no node named 'nope'
// SCHED: unknown pipeline schedule 'zigzag' (expected gpipe, 1f1b, interleaved, zb-h1 or zb-v)
// INTER: the interleaved schedule needs micro-batches (3) to be a multiple of the pipeline stages (2)
func.func @forward(%w0: tensor<32x16xf32> {graph.param = "fc0.weight", graph.trainable},
                   %w1: tensor<32x32xf32> {graph.param = "fc1.weight", graph.trainable},
                   %w2: tensor<64x32xf32> {graph.param = "fc2.weight", graph.trainable},
                   %b2: tensor<64xf32> {graph.param = "fc2.bias", graph.trainable},
                   %x: tensor<8x16xf32> {graph.data = "input"},
                   %y: tensor<8xi64> {graph.data = "target"})
    -> (tensor<f32> {graph.output = "loss"}) {
  %0 = graph.matmul %x, %w0 {transpose_rhs = true} : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32> loc("fc0")
  %1 = graph.relu %0 : tensor<8x32xf32> loc("relu0")
  %2 = graph.matmul %1, %w1 {transpose_rhs = true} : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32> loc("fc1")
  %3 = graph.relu %2 : tensor<8x32xf32> loc("relu1")
  %4 = graph.matmul %3, %w2 {transpose_rhs = true} : tensor<8x32xf32>, tensor<64x32xf32> -> tensor<8x64xf32> loc("fc2")
  %5 = graph.add %4, %b2 : tensor<8x64xf32>, tensor<64xf32> loc("fc2")
  %6 = graph.softmax_cross_entropy %5, %y : tensor<8x64xf32>, tensor<8xi64> loc("loss")
  return %6 : tensor<f32>
}
