#ifndef DTC_GRAPH_DIALECT_TD
#define DTC_GRAPH_DIALECT_TD

include "mlir/IR/OpBase.td"
include "common/OpInterfaces.td"

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

// Roles passes ask by trait (GraphTraits.h).
def Graph_NormalizesFeatures : NativeOpTrait<"NormalizesFeatures"> {
  let cppNamespace = "::dtc::graph::trait";
}
def Graph_OptimizerUpdate : NativeOpTrait<"OptimizerUpdate"> {
  let cppNamespace = "::dtc::graph::trait";
}

// Every op says how it shards and what it does to sequence positions, in its own .cpp: the
// methods are declared here, so an op without them does not link.
def Graph_ShardingRule : DeclareOpInterfaceMethods<ShardingRuleOpInterface>;
def Graph_SequenceRule : DeclareOpInterfaceMethods<SequenceOpInterface>;

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, !listconcat(traits, [Graph_ShardingRule, Graph_SequenceRule])>;

// Losses and the like: the op sums over every position it reads, so it takes them in any order
// and merged into rows with the batch.
defvar Graph_SumsOverPositions = [{ bool sumsOverPositions() { return true; } }];

// An op whose operands and results share one shape (rank-0 operands excepted): every dimension
// shards alike.
defvar Graph_ElementwiseSharding = [{
    ::dtc::sharding::OpShardingRule $cppClass::getShardingRule() {
      return ::dtc::sharding::elementwiseRule(getOperation());
    }
  }];

// Such an op also keeps its positions.
defvar Graph_ElementwiseRules = Graph_ElementwiseSharding # [{
    void $cppClass::traceSequence(::dtc::sharding::SequenceTrace &trace) {
      ::dtc::sharding::sequenceThroughSameShape(trace);
    }
  }];
class Graph_ElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, traits> {
  let extraClassDefinition = Graph_ElementwiseRules;
}

// A gradient whose operands and results share one shape: it shards as an element-wise op; the
// sequence trace, which follows the forward computation, stops at it.
class Graph_ElementwiseGradOp<string mnemonic, list<Trait> traits = []>
    : Graph_Op<mnemonic, traits> {
  let extraClassDefinition = Graph_ElementwiseSharding # [{
    void $cppClass::traceSequence(::dtc::sharding::SequenceTrace &trace) {
      ::dtc::sharding::sequenceStopsAtGradient(trace);
    }
  }];
}

#endif // DTC_GRAPH_DIALECT_TD
