// The collectives' operand contracts, shared by the CPU and CUDA kernel tables so that both
// backends accept the same steps and refuse the others with the same messages. Each step's check
// (check*) returns its group and what its launch needs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "exec/bind_util.h"

namespace dtc {

// The mesh axes a collective step runs over (its `axes` attribute), checked against the mesh.
inline StatusOr<std::vector<int>> collectiveAxes(const StepContext& ctx) {
  if (!ctx.mesh) return invalid(ctx, "a collective in a plan run without a device mesh");
  return meshAxesAttr(ctx, "axes");
}

inline Status floats(const StepContext& ctx) {
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (t.dtype != DType::kF32) return invalid(ctx, "collectives reduce float32 tensors only");
  return Status::Ok();
}

// Collectives that only move data take float32, int64 or FP8 tensors, moved as float32 words
// copied bit for bit: an int64 element is two words, four FP8 codes are one. The words along the
// last dimension per element, as a fraction.
struct WordsPerElement {
  int64_t num = 1, den = 1;
};

inline StatusOr<WordsPerElement> movable(const StepContext& ctx) {
  DType t = ctx.inputs.empty() ? ctx.outputs[0].dtype : ctx.inputs[0].dtype;
  const bool fp8 = float8(t);
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list) {
      if (v.dtype != t || (t != DType::kF32 && t != DType::kI64 && !fp8))
        return invalid(ctx, "moves float32, int64 or FP8 tensors of one dtype only");
      if (fp8 && (v.shape.empty() || v.shape.back() % 4 != 0))
        return invalid(ctx, "an FP8 tensor moves as 4-byte words: " + str(v.shape) +
                                " needs a last dimension that is a multiple of 4");
    }
  if (t == DType::kI64) return WordsPerElement{2, 1};
  return fp8 ? WordsPerElement{1, 4} : WordsPerElement{};
}

// A tensor seen as float32 words along its last dimension (movable()).
inline TensorView words(TensorView t, WordsPerElement w) {
  if (w.num != 1 || w.den != 1) {
    if (t.shape.empty()) t.shape.push_back(1);
    t.shape.back() = t.shape.back() * w.num / w.den;
  }
  t.dtype = DType::kF32;
  return t;
}

// Checks `out` = `in` with dimension `dim` (attribute `attr`) scaled by num/den; returns dim.
inline StatusOr<int64_t> scaledDim(const StepContext& ctx, const char* attr, const Shape& in,
                                   const Shape& out, int64_t num, int64_t den) {
  int64_t dim = ctx.intAttr(attr);
  if (dim < 0 || dim >= static_cast<int64_t>(in.size()) || in.size() != out.size())
    return invalid(ctx, std::string(attr) + " " + std::to_string(dim) + " is out of range");
  Shape want = in;
  if (want[dim] * num % den != 0)
    return invalid(ctx, "dimension " + std::to_string(dim) + " of " + str(in) +
                            " does not divide over " + std::to_string(den) + " devices");
  want[dim] = want[dim] * num / den;
  if (want != out) return invalid(ctx, "output " + str(out) + " should be " + str(want));
  return dim;
}

// A tensor seen as [outer, mid, inner] around dimension `dim`.
struct Around {
  int64_t outer = 1, mid = 1, inner = 1;
  Around(const Shape& shape, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < dim ? outer : d == dim ? mid : inner) *= shape[d];
  }
};

// This device's group over the step's mesh axes: its communicator, size and index in it.
struct CollectiveGroup {
  comm::Communicator* comm = nullptr;
  int64_t size = 1, index = 0;
  std::vector<int> axes;
};

inline StatusOr<CollectiveGroup> collectiveGroup(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(std::vector<int> axes, collectiveAxes(ctx));
  CollectiveGroup g;
  DTC_ASSIGN_OR_RETURN(g.comm, ctx.mesh->group(axes));
  g.size = ctx.mesh->groupSize(axes);
  g.index = ctx.mesh->indexIn(axes);
  g.axes = axes;
  return g;
}

// count_once: x kept by the group's first member (its index along `axes` is 0), zeros on the
// others. Returns whether this device keeps it.
inline StatusOr<bool> checkCountOnce(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(floats(ctx));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(std::vector<int> axes, collectiveAxes(ctx));
  return ctx.mesh->indexIn(axes) == 0;
}

// all_reduce: each input summed (or, one tensor alone, maxed: `reduction`) over the group into
// its output; several tensors are a bucket of `total` elements.
struct AllReduceStep {
  CollectiveGroup group;
  int64_t total = 0;
  bool max = false;
};

inline StatusOr<AllReduceStep> checkAllReduce(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(floats(ctx));
  if (ctx.inputs.empty() || ctx.inputs.size() != ctx.outputs.size())
    return invalid(ctx, "needs as many outputs as inputs");
  AllReduceStep r;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[i], ctx.outputs[i]));
    r.total += ctx.inputs[i].numElements();
  }
  DTC_ASSIGN_OR_RETURN(r.group, collectiveGroup(ctx));
  std::string reduction = ctx.stringAttr("reduction");
  if (reduction != "" && reduction != "sum" && reduction != "max")
    return invalid(ctx, "unknown reduction '" + reduction + "'");
  r.max = reduction == "max";
  if (r.max && ctx.inputs.size() > 1)
    return invalid(ctx, "a bucket of several tensors reduces by sum only");
  return r;
}

// A collective's group and its one input and one output.
struct MovedOperands {
  CollectiveGroup group;
  TensorView in, out;
};

// The collectives that only move data (all_gather, local_slice, all_to_all): one float32, int64
// or FP8 input and output, seen as float32 words (words()).
inline StatusOr<MovedOperands> movedOperands(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(WordsPerElement w, movable(ctx));
  MovedOperands m;
  DTC_ASSIGN_OR_RETURN(m.group, collectiveGroup(ctx));
  m.in = words(ctx.inputs[0], w), m.out = words(ctx.outputs[0], w);
  return m;
}

// The block collectives (all_gather, reduce_scatter, local_slice): in and out differ along
// dimension `dim` by the group's size.
struct BlockStep : MovedOperands {
  int64_t dim = 0;
};

// all_gather (gather = true: out's `dim` is the group's blocks of in) or local_slice (this
// device's block of in).
inline StatusOr<BlockStep> checkBlockMove(const StepContext& ctx, bool gather) {
  DTC_ASSIGN_OR_RETURN(MovedOperands m, movedOperands(ctx));
  const int64_t n = m.group.size;
  DTC_ASSIGN_OR_RETURN(
      int64_t dim, scaledDim(ctx, "dim", m.in.shape, m.out.shape, gather ? n : 1, gather ? 1 : n));
  return BlockStep{std::move(m), dim};
}

inline StatusOr<BlockStep> checkAllGather(const StepContext& ctx) {
  return checkBlockMove(ctx, true);
}
inline StatusOr<BlockStep> checkLocalSlice(const StepContext& ctx) {
  return checkBlockMove(ctx, false);
}

// reduce_scatter: out = this device's block along `dim` of in summed over the group (float32).
inline StatusOr<BlockStep> checkReduceScatter(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_ASSIGN_OR_RETURN(CollectiveGroup g, collectiveGroup(ctx));
  const TensorView &in = ctx.inputs[0], &out = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, 1, g.size));
  return BlockStep{{std::move(g), in, out}, dim};
}

// all_to_all: in cut into the group's blocks along `split_dim`, block r sent to member r, the
// blocks received joined along `concat_dim`.
struct AllToAllStep : MovedOperands {
  int64_t split = 0, concat = 0;
};

inline StatusOr<AllToAllStep> checkAllToAll(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(MovedOperands m, movedOperands(ctx));
  const Shape& in = m.in.shape;
  const int64_t size = m.group.size;
  int64_t split = ctx.intAttr("split_dim"), concat = ctx.intAttr("concat_dim");
  int64_t rank = static_cast<int64_t>(in.size());
  if (split < 0 || split >= rank || concat < 0 || concat >= rank || split == concat ||
      in[split] % size != 0)
    return invalid(ctx, "bad split_dim/concat_dim for " + str(in));
  Shape want = in;
  want[split] /= size;
  want[concat] *= size;
  if (want != m.out.shape)
    return invalid(ctx, "output " + str(m.out.shape) + " should be " + str(want));
  return AllToAllStep{std::move(m), split, concat};
}

// collective_broadcast: out = the group member `root`'s in (float32).
struct BroadcastStep {
  CollectiveGroup group;
  int root = 0;
};

inline StatusOr<BroadcastStep> checkCollectiveBroadcast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  BroadcastStep b;
  DTC_ASSIGN_OR_RETURN(b.group, collectiveGroup(ctx));
  int64_t root = ctx.intAttr("root");
  if (root < 0 || root >= b.group.size) return invalid(ctx, "root outside the group");
  b.root = static_cast<int>(root);
  return b;
}

// Point to point along a group: the member `shift` places ahead (send) or behind (recv).
// Tensors of any dtype travel as bytes; `tag` tells apart the transfers between two ranks in one
// call of a function (a pipeline's micro-batches), which arrive in any order.
struct PointToPointStep {
  CollectiveGroup group;
  int peer = 0, tag = 0;
  int64_t bytes = 0;  // the tensor's
};

inline StatusOr<PointToPointStep> checkPointToPoint(const StepContext& ctx, bool send) {
  if (send ? ctx.inputs.size() != 1 || !ctx.outputs.empty()
           : !ctx.inputs.empty() || ctx.outputs.size() != 1)
    return invalid(ctx, send ? "expects 1 input and 0 outputs" : "expects 0 inputs and 1 output");
  PointToPointStep p;
  DTC_ASSIGN_OR_RETURN(p.group, collectiveGroup(ctx));
  int64_t tag = ctx.intAttr("tag");
  if (tag < 0 || tag > comm::Communicator::kMaxTag)
    return invalid(ctx, "tag " + std::to_string(tag) + " is outside [0, " +
                            std::to_string(comm::Communicator::kMaxTag) + "]");
  p.tag = static_cast<int>(tag);
  const int64_t size = p.group.size, shift = ctx.intAttr("shift");
  const int64_t at = send ? p.group.index + shift : p.group.index - shift;
  p.peer = static_cast<int>((at % size + size) % size);
  const TensorView& t = send ? ctx.inputs[0] : ctx.outputs[0];
  p.bytes = t.numElements() * static_cast<int64_t>(dtypeSize(t.dtype));
  return p;
}

// ring_shift: every member of the group sends x to the member `shift` places ahead and takes the
// one `shift` places behind's (a ring's step; any dtype, as bytes). Collective: every member
// calls it, and its transfers match by call order.
struct RingShiftStep {
  CollectiveGroup group;
  int to = 0, from = 0;
  int64_t bytes = 0;
};

inline StatusOr<RingShiftStep> checkRingShift(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 1 input and 1 output");
  const TensorView &in = ctx.inputs[0], &out = ctx.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return invalid(ctx, "output " + str(out.shape) + " differs from input " + str(in.shape));
  RingShiftStep r;
  DTC_ASSIGN_OR_RETURN(r.group, collectiveGroup(ctx));
  const int64_t size = r.group.size, shift = ctx.intAttr("shift") % size;
  r.to = static_cast<int>((r.group.index + shift + size) % size);
  r.from = static_cast<int>((r.group.index - shift + size) % size);
  r.bytes = in.numElements() * static_cast<int64_t>(dtypeSize(in.dtype));
  return r;
}

inline StatusOr<PointToPointStep> checkSend(const StepContext& ctx) {
  return checkPointToPoint(ctx, true);
}
inline StatusOr<PointToPointStep> checkRecv(const StepContext& ctx) {
  return checkPointToPoint(ctx, false);
}

}  // namespace dtc
