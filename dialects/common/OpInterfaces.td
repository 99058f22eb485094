#ifndef DTC_COMMON_OP_INTERFACES_TD
#define DTC_COMMON_OP_INTERFACES_TD

include "mlir/IR/OpBase.td"

// What an op means to partitioning, said by the op: every op of the graph dialect implements
// both (its base class declares them, so an op without them does not link), and the passes
// read nothing else.

def ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::dtc::sharding";
  let description = [{
    The op's factor-based sharding rule (common/ShardingRule.h): which dimensions of its
    operands and results share an index space, which it sums or maximises over, and which it
    needs whole. Sharding propagation and the partitioner read only this.
  }];
  let methods = [
    InterfaceMethod<"The op's sharding rule, read from its current (global) types.",
      "::dtc::sharding::OpShardingRule", "getShardingRule">,
  ];
}

def SequenceOpInterface : OpInterface<"SequenceOpInterface"> {
  let cppNamespace = "::dtc::sharding";
  let description = [{
    What the op does to sequence positions (common/SequenceTrace.h), for context parallelism:
    given the operands a sequence reached and along which dimension, it marks where its results
    hold the sequence, which of its other operands are indexed by position, or that it reads
    positions in order (which a reordered or split sequence breaks).
  }];
  let methods = [
    InterfaceMethod<[{Records what the op does to the positions of `trace.carried()` (never
        positions merged into rows, which only ops that sum over positions take), or that the
        trace does not follow them through it (`trace.ordered`, saying why).}],
      "void", "traceSequence", (ins "::dtc::sharding::SequenceTrace &":$trace)>,
    InterfaceMethod<[{Whether the op sums over the positions it reads (a loss): any order, and
        positions merged into rows with the batch, give the same result.}],
      "bool", "sumsOverPositions", (ins), [{}], [{ return false; }]>,
  ];
}

#endif // DTC_COMMON_OP_INTERFACES_TD
