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
  }];
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif // DTC_GRAPH_DIALECT_TD
