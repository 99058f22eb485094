// The collectives of partitioned plans on the CPU backend: each step runs over the
// communicator of its mesh-axis group. Tensors are row-major; a block along dimension d is
// strided, so steps pack blocks into contiguous staging buffers around the communicator call.
#include <cstring>
#include <memory>

#include "exec/collective_contract.h"

namespace dtc {
namespace {

// A tensor seen as [outer, mid, inner] around dimension `dim`.
struct Around {
  int64_t outer = 1, mid = 1, inner = 1;
  Around(const Shape& shape, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < dim ? outer : d == dim ? mid : inner) *= shape[d];
  }
};

// out = block `index` of `parts` along the middle dimension of x ([outer, mid, inner]).
void extractBlock(const float* x, Around a, int64_t parts, int64_t index, float* out) {
  int64_t m = a.mid / parts, run = m * a.inner;
  for (int64_t o = 0; o < a.outer; ++o)
    std::memcpy(out + o * run, x + (o * a.mid + index * m) * a.inner, run * sizeof(float));
}

// Block `index` of y ([outer, mid, inner]) along the middle dimension = block.
void insertBlock(float* y, Around a, int64_t parts, int64_t index, const float* block) {
  int64_t m = a.mid / parts, run = m * a.inner;
  for (int64_t o = 0; o < a.outer; ++o)
    std::memcpy(y + (o * a.mid + index * m) * a.inner, block + o * run, run * sizeof(float));
}

struct Group {
  comm::Communicator* comm = nullptr;
  int64_t size = 1, index = 0;
};

StatusOr<Group> groupOf(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(std::vector<int> axes, collectiveAxes(ctx));
  Group g;
  DTC_ASSIGN_OR_RETURN(g.comm, ctx.mesh->group(axes));
  g.size = ctx.mesh->groupSize(axes);
  g.index = ctx.mesh->indexIn(axes);
  return g;
}

StatusOr<BoundStep> bindAllReduce(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(floats(ctx));
  if (ctx.inputs.empty() || ctx.inputs.size() != ctx.outputs.size())
    return invalid(ctx, "needs as many outputs as inputs");
  int64_t total = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[i], ctx.outputs[i]));
    total += ctx.inputs[i].numElements();
  }
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  std::string reduction = ctx.stringAttr("reduction");
  if (reduction != "" && reduction != "sum" && reduction != "max")
    return invalid(ctx, "unknown reduction '" + reduction + "'");
  const bool max = reduction == "max";
  std::vector<TensorView> ins = ctx.inputs, outs = ctx.outputs;
  if (ins.size() == 1) {
    TensorView in = ins[0], out = outs[0];
    return BoundStep([=] {
      if (in.data != out.data) std::memcpy(out.data, in.data, in.numElements() * sizeof(float));
      return max ? g.comm->allReduceMax(out.f32(), out.numElements())
                 : g.comm->allReduceSum(out.f32(), out.numElements());
    });
  }
  if (max) return invalid(ctx, "a bucket of several tensors reduces by sum only");
  // A bucket: one call on the tensors packed end to end.
  auto staging = std::make_shared<std::vector<float>>(total);
  return BoundStep([=] {
    float* at = staging->data();
    for (const TensorView& t : ins) {
      std::memcpy(at, t.data, t.numElements() * sizeof(float));
      at += t.numElements();
    }
    DTC_RETURN_IF_ERROR(g.comm->allReduceSum(staging->data(), total));
    at = staging->data();
    for (const TensorView& t : outs) {
      std::memcpy(t.data, at, t.numElements() * sizeof(float));
      at += t.numElements();
    }
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAllGather(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(int64_t w, movable(ctx));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  TensorView in = words(ctx.inputs[0], w), out = words(ctx.outputs[0], w);
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, g.size, 1));
  Around a(out.shape, dim);
  int64_t n = in.numElements();
  auto staging = std::make_shared<std::vector<float>>(n * g.size);
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(g.comm->allGather(in.f32(), n, staging->data()));
    for (int64_t r = 0; r < g.size; ++r) insertBlock(out.f32(), a, g.size, r, staging->data() + r * n);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindReduceScatter(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, 1, g.size));
  Around a(in.shape, dim);
  int64_t n = out.numElements();
  auto staging = std::make_shared<std::vector<float>>(n * g.size);
  return BoundStep([=] {
    for (int64_t r = 0; r < g.size; ++r) extractBlock(in.f32(), a, g.size, r, staging->data() + r * n);
    return g.comm->reduceScatterSum(staging->data(), n, out.f32());
  });
}

StatusOr<BoundStep> bindLocalSlice(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(int64_t w, movable(ctx));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  TensorView in = words(ctx.inputs[0], w), out = words(ctx.outputs[0], w);
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, 1, g.size));
  Around a(in.shape, dim);
  return BoundStep([=] {
    extractBlock(in.f32(), a, g.size, g.index, out.f32());
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAllToAll(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(int64_t w, movable(ctx));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  TensorView in = words(ctx.inputs[0], w), out = words(ctx.outputs[0], w);
  int64_t split = ctx.intAttr("split_dim"), concat = ctx.intAttr("concat_dim");
  int64_t rank = static_cast<int64_t>(in.shape.size());
  if (split < 0 || split >= rank || concat < 0 || concat >= rank || split == concat ||
      in.shape[split] % g.size != 0)
    return invalid(ctx, "bad split_dim/concat_dim for " + str(in.shape));
  Shape want = in.shape;
  want[split] /= g.size;
  want[concat] *= g.size;
  if (want != out.shape) return invalid(ctx, "output " + str(out.shape) + " should be " + str(want));
  int64_t n = in.numElements() / g.size;
  Around from(in.shape, split), to(out.shape, concat);
  auto send = std::make_shared<std::vector<float>>(n * g.size);
  auto recv = std::make_shared<std::vector<float>>(n * g.size);
  return BoundStep([=] {
    for (int64_t r = 0; r < g.size; ++r) extractBlock(in.f32(), from, g.size, r, send->data() + r * n);
    DTC_RETURN_IF_ERROR(g.comm->allToAll(send->data(), n, recv->data()));
    for (int64_t r = 0; r < g.size; ++r) insertBlock(out.f32(), to, g.size, r, recv->data() + r * n);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCollectiveBroadcast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  int64_t root = ctx.intAttr("root");
  if (root < 0 || root >= g.size) return invalid(ctx, "root outside the group");
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  return BoundStep([=] {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.numElements() * sizeof(float));
    return g.comm->broadcast(out.f32(), out.numElements(), static_cast<int>(root));
  });
}

// Point to point along a group: the member `shift` places ahead (send) or behind (recv).
// Tensors of any dtype travel as bytes; `tag` tells apart the transfers between two ranks in one
// call of a function (a pipeline's micro-batches), which arrive in any order.
StatusOr<int> tagOf(const StepContext& ctx) {
  int64_t tag = ctx.intAttr("tag");
  if (tag < 0 || tag > comm::Communicator::kMaxTag)
    return invalid(ctx, "tag " + std::to_string(tag) + " is outside [0, " +
                            std::to_string(comm::Communicator::kMaxTag) + "]");
  return static_cast<int>(tag);
}

int64_t bytesOf(const TensorView& t) { return t.numElements() * static_cast<int64_t>(dtypeSize(t.dtype)); }

StatusOr<BoundStep> bindSend(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || !ctx.outputs.empty()) return invalid(ctx, "expects 1 input and 0 outputs");
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  DTC_ASSIGN_OR_RETURN(int tag, tagOf(ctx));
  int peer = static_cast<int>(((g.index + ctx.intAttr("shift")) % g.size + g.size) % g.size);
  TensorView in = ctx.inputs[0];
  // Buffered: the communicator copies the bytes, so the arena may reuse them at once.
  return BoundStep([=] { return g.comm->send(in.data, bytesOf(in), peer, tag); });
}

StatusOr<BoundStep> bindRecv(const StepContext& ctx) {
  if (!ctx.inputs.empty() || ctx.outputs.size() != 1) return invalid(ctx, "expects 0 inputs and 1 output");
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  DTC_ASSIGN_OR_RETURN(int tag, tagOf(ctx));
  int peer = static_cast<int>(((g.index - ctx.intAttr("shift")) % g.size + g.size) % g.size);
  TensorView out = ctx.outputs[0];
  return BoundStep([=] { return g.comm->recv(out.data, bytesOf(out), peer, tag); });
}

}  // namespace

const BinderTable& collectiveBinders() {
  static const BinderTable table = {
      {"all_reduce", bindAllReduce},       {"all_gather", bindAllGather},
      {"reduce_scatter", bindReduceScatter}, {"local_slice", bindLocalSlice},
      {"all_to_all", bindAllToAll},       {"collective_broadcast", bindCollectiveBroadcast},
      {"send", bindSend},                 {"recv", bindRecv},
  };
  return table;
}

}  // namespace dtc
