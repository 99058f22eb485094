#ifndef DTC_GRAPH_DIALECT_TD
#define DTC_GRAPH_DIALECT_TD

include "mlir/IR/OpBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::dtc::graph";
  let summary = "Coarse tensor ops of a model graph and its training step";
  let description = [{
    The level at which dtc differentiates, optimises and (later) partitions: ops keep their
    mathematical meaning (matmul, cross-entropy, optimizer updates), so gradient rules and
    sharding rules are written once per op. All values are statically shaped ranked tensors.
    The training contracts on modules, functions and ops (`graph.param`, `graph.updates`, ...)
    are declared in GraphAttributes.def and verified where they appear.
  }];
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif // DTC_GRAPH_DIALECT_TD
