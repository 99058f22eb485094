// RUN: dtc-opt %s -split-input-file -verify-diagnostics
// The training contracts of the graph, dist and plan dialects are declared (their
// *Attributes.def) and verified where they appear: undeclared names, misplaced attributes and
// values of the wrong kind are errors naming the attribute and the place.

// A step as the passes leave it: every contract where it belongs.
module attributes {graph.loss = "y", graph.batch_size = 2 : i64, plan.device = "cpu",
                   dist.mesh = #dist.mesh<dp = 2>, plan.state_bytes = 8 : i64,
                   plan.state_layout = {w = 0 : i64}} {
  func.func @train_step(%w: tensor<2xf32> {graph.param = "w", graph.trainable,
                                           dist.sharding = #dist.sharding<[{}]>},
                        %x: tensor<2xf32> {graph.data = "x", graph.batch_dim = 0 : i64},
                        %lr: tensor<f32> {graph.hyper = "lr"})
      -> (tensor<2xf32> {graph.output = "y"}, tensor<2xf32> {graph.updates = "w"})
      attributes {plan.arena_bytes = 8 : i64, plan.arg_offsets = array<i64: 0, 0, 8>,
                  plan.arg_regions = array<i64: 0, 1, 1>} {
    %0 = graph.relu %x {plan.offsets = array<i64: 0>, plan.regions = array<i64: 1>,
                        dist.stage = 0 : i64} : tensor<2xf32>
    return %0, %w : tensor<2xf32>, tensor<2xf32>
  }
}

// -----

// expected-error @+1 {{carries 'graph.paramz' on argument 0, which its dialect does not declare}}
func.func @f(%a: tensor<2xf32> {graph.paramz = "w"}) {
  return
}

// -----

// expected-error @+1 {{carries 'graph.loss' on the module as 3 : i64; it must be mlir::StringAttr}}
module attributes {graph.loss = 3 : i64} {}

// -----

func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{carries 'graph.param' on an op, where it does not belong}}
  %0 = graph.relu %a {graph.param = "w"} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// expected-error @+1 {{carries 'graph.output' on argument 0, where it does not belong}}
func.func @f(%a: tensor<2xf32> {graph.output = "y"}) {
  return
}

// -----

func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{carries 'plan.offsets' on an op as 0 : i64; it must be mlir::DenseI64ArrayAttr}}
  %0 = graph.relu %a {plan.offsets = 0 : i64} : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// expected-error @+1 {{carries 'dist.sharding' on result 0 as "tp"; it must be ::dtc::dist::ShardingAttr}}
func.func @f(%a: tensor<2xf32>) -> (tensor<2xf32> {dist.sharding = "tp"}) {
  return %a : tensor<2xf32>
}

// -----

// expected-error @+1 {{carries 'plan.arena_bytes' on the module, where it does not belong}}
module attributes {plan.arena_bytes = 8 : i64} {}
