// Verifiers of the collectives: the group's axes exist on the module's mesh and the local
// shapes before and after agree with what the collective does to them.
#include "dist/IR/DistOps.h"

#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace dtc::dist;

namespace {

// The group's size, or failure (with an error on `op`) if `axes` are not distinct mesh axes.
FailureOr<int64_t> groupSize(Operation* op, ArrayAttr axes) {
  MeshAttr mesh = getMesh(op);
  if (!mesh) return op->emitOpError("needs a module with a `dist.mesh` attribute");
  llvm::SmallSet<StringRef, 4> seen;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    if (mesh.axisIndex(name) < 0) return op->emitOpError("mesh has no axis '") << name << "'";
    if (!seen.insert(name).second) return op->emitOpError("axis '") << name << "' named twice";
  }
  return mesh.groupSize(axes);
}

LogicalResult checkDim(Operation* op, RankedTensorType type, int64_t dim, StringRef what) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError() << what << " " << dim << " is out of range for rank "
                             << type.getRank();
  return success();
}

// `result` must equal `x` except along `dim`, where it is x·num/den.
LogicalResult checkScaled(Operation* op, Value x, Value result, int64_t dim, int64_t num,
                          int64_t den) {
  auto in = cast<RankedTensorType>(x.getType());
  auto out = cast<RankedTensorType>(result.getType());
  if (failed(checkDim(op, in, dim, "dim"))) return failure();
  if (in.getElementType() != out.getElementType() || in.getRank() != out.getRank())
    return op->emitOpError("result type ") << out << " does not match input " << in;
  if (in.getDimSize(dim) * num % den != 0)
    return op->emitOpError("dimension ") << dim << " of size " << in.getDimSize(dim)
                                         << " does not divide over " << den << " devices";
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t want = d == dim ? in.getDimSize(d) * num / den : in.getDimSize(d);
    if (out.getDimSize(d) != want)
      return op->emitOpError("result type ") << out << " does not match input " << in << " over "
                                             << std::max(num, den) << " devices";
  }
  return success();
}

}  // namespace

LogicalResult AllReduceOp::verify() {
  if (failed(groupSize(*this, getAxes()))) return failure();
  if (getReduction() != "sum" && getReduction() != "max")
    return emitOpError("reduction must be sum or max, got '") << getReduction() << "'";
  if (getInputs().size() != getResults().size() || getInputs().empty())
    return emitOpError("needs as many results as inputs, at least one");
  for (auto [in, out] : llvm::zip(getInputs(), getResults()))
    if (in.getType() != out.getType())
      return emitOpError("result type ") << out.getType() << " differs from " << in.getType();
  return success();
}

LogicalResult AllGatherOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  return failed(n) ? failure() : checkScaled(*this, getX(), getResult(), getDim(), *n, 1);
}

LogicalResult ReduceScatterOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  return failed(n) ? failure() : checkScaled(*this, getX(), getResult(), getDim(), 1, *n);
}

LogicalResult LocalSliceOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  return failed(n) ? failure() : checkScaled(*this, getX(), getResult(), getDim(), 1, *n);
}

LogicalResult AllToAllOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n)) return failure();
  auto in = cast<RankedTensorType>(getX().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (failed(checkDim(*this, in, getSplitDim(), "split_dim")) ||
      failed(checkDim(*this, in, getConcatDim(), "concat_dim")))
    return failure();
  if (getSplitDim() == getConcatDim()) return emitOpError("split_dim equals concat_dim");
  if (in.getDimSize(getSplitDim()) % *n != 0)
    return emitOpError("dimension ") << getSplitDim() << " of size " << in.getDimSize(getSplitDim())
                                     << " does not divide over " << *n << " devices";
  SmallVector<int64_t> want(in.getShape());
  want[getSplitDim()] /= *n;
  want[getConcatDim()] *= *n;
  if (out.getShape() != ArrayRef<int64_t>(want) || out.getElementType() != in.getElementType())
    return emitOpError("result type ") << out << " does not match input " << in;
  return success();
}

LogicalResult CollectiveBroadcastOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n)) return failure();
  if (getRoot() >= static_cast<uint64_t>(*n))
    return emitOpError("root ") << getRoot() << " is outside the group of " << *n;
  return success();
}

LogicalResult CountOnceOp::verify() { return groupSize(*this, getAxes()); }

LogicalResult RingShiftOp::verify() { return groupSize(*this, getAxes()); }

LogicalResult SendOp::verify() { return groupSize(*this, getAxes()); }
LogicalResult RecvOp::verify() { return groupSize(*this, getAxes()); }

// A layout pinned on a value moves no element and no position.
dtc::sharding::OpShardingRule ReshardOp::getShardingRule() {
  return dtc::sharding::elementwiseRule(*this);
}
void ReshardOp::traceSequence(dtc::sharding::SequenceTrace& trace) {
  trace.set(getResult(), trace.dim());
}
