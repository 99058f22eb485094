#ifndef DTC_DIST_OPS_TD
#define DTC_DIST_OPS_TD

include "DistDialect.td"
include "DistAttrs.td"
include "common/OpInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Before partitioning (global shapes).

def Dist_ReshardOp : Dist_Op<"reshard", [Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<ShardingRuleOpInterface>,
    DeclareOpInterfaceMethods<SequenceOpInterface>]> {
  let summary = "The value of x with the given sharding (a constraint for propagation)";
  let description = [{
    Propagation treats `sharding` as a user annotation of the result; the partitioner replaces
    the op by the collectives that move x's sharding to it.
  }];
  let arguments = (ins AnyRankedTensor:$x, Dist_ShardingAttr:$sharding);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x $sharding attr-dict `:` type($x)";
}

// After partitioning (local shapes). `axes` name the mesh axes of the group, major first: a
// device's index in the group is its coordinates on `axes`, row-major.

class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat([Pure], traits)> {
  let hasVerifier = 1;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce"> {
  let summary = "Sum (or maximum) over the group of each input (several inputs form one bucket)";
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, StrArrayAttr:$axes,
                       DefaultValuedStrAttr<StrAttr, "sum">:$reduction);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = "$inputs `over` $axes attr-dict `:` type($inputs) `->` type($results)";
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather"> {
  let summary = "Concatenate the group's pieces along `dim`, in group order";
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x) `->` type($result)";
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter"> {
  let summary = "Sum over the group, then keep block <group index> of `dim`";
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x) `->` type($result)";
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all"> {
  let summary = "Cut `split_dim` into group-size blocks, send block j to member j, concatenate "
                "the received blocks along `concat_dim`";
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x) `->` type($result)";
}

def Dist_LocalSliceOp : Dist_CollectiveOp<"local_slice"> {
  let summary = "Keep block <group index> of `dim` (no communication)";
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$dim);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x) `->` type($result)";
}

def Dist_CollectiveBroadcastOp : Dist_CollectiveOp<"collective_broadcast",
                                                  [SameOperandsAndResultType]> {
  let summary = "Every member gets member `root`'s x";
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$root);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x)";
}

def Dist_CountOnceOp : Dist_CollectiveOp<"count_once", [SameOperandsAndResultType]> {
  let summary = "x on the first member of the group along `axes`, zero on the others";
  let description = [{
    A value every member of the group holds alike (a replicated parameter's squared norm),
    counted once by a later sum over the group: the member whose coordinates on `axes` are all 0
    keeps it. No communication.
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x)";
}

def Dist_RingShiftOp : Dist_CollectiveOp<"ring_shift", [SameOperandsAndResultType]> {
  let summary = "Every member sends x to the member `shift` places further along `axes` and "
                "receives the one `shift` places back's (a ring's step)";
  let description = [{
    Context parallelism's ring attention passes each block of keys and values, and their
    gradients' accumulators, one place along the ring per step. A collective: all members send
    and receive at once, so it cannot deadlock, and its transfers match by program order.
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$shift);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x)";
}

def Dist_SendOp : Dist_Op<"send"> {
  let summary = "Send x to the member `shift` places further along `axes` (pipeline stages)";
  let description = [{
    Never blocks: the runtime copies x and sends it in the background. `tag` tells this
    transfer from others between the same two devices in one step (a receiver may take them
    in another order than they were sent).
  }];
  let arguments = (ins AnyRankedTensor:$x, StrArrayAttr:$axes, I64Attr:$shift,
                   DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = "$x `over` $axes attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_Op<"recv"> {
  let summary = "Receive from the member `shift` places back along `axes`";
  let description = [{ Blocks until the transfer with this `tag` from that member arrives. }];
  let arguments = (ins StrArrayAttr:$axes, I64Attr:$shift, DefaultValuedAttr<I64Attr, "0">:$tag);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "`over` $axes attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // DTC_DIST_OPS_TD
