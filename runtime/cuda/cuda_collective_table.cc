// The collectives of partitioned plans on CUDA, staged through the host: each step copies its
// blocks from the GPU into pinned buffers, calls the same Communicator method as the CPU
// backend (exec/cpu_collective_table.cc, whose contracts these repeat), and copies the result
// back. Correct on any MPI; NCCL on device memory comes later.
//
// Every step synchronises the stream before it touches the staging buffers (its inputs must be
// computed, and an earlier step's upload from them must be done); its own uploads stay in
// flight, ordered before the kernels that follow on the stream.
#include "cuda_bind.h"

namespace dtc::cuda {
namespace {

// A tensor seen as [outer, mid, inner] around dimension `dim`.
struct Around {
  int64_t outer = 1, mid = 1, inner = 1;
  Around(const Shape& shape, int64_t dim) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      (d < dim ? outer : d == dim ? mid : inner) *= shape[d];
  }
};

// Block `index` of `parts` along the middle dimension of `whole` ([outer, mid, inner] floats)
// from or into `block` (contiguous [outer, mid/parts, inner]); one strided 2-D copy.
cudaError_t blockCopy(float* whole, const Around& a, int64_t parts, int64_t index, float* block, bool intoWhole,
                      cudaMemcpyKind kind, cudaStream_t stream) {
  const int64_t m = a.mid / parts;
  const size_t run = m * a.inner * sizeof(float), pitch = a.mid * a.inner * sizeof(float);
  if (run == 0 || a.outer == 0) return cudaSuccess;
  float* at = whole + index * m * a.inner;
  return intoWhole ? cudaMemcpy2DAsync(at, pitch, block, run, run, a.outer, kind, stream)
                   : cudaMemcpy2DAsync(block, run, at, pitch, run, a.outer, kind, stream);
}

struct Group {
  comm::Communicator* comm = nullptr;
  int64_t size = 1, index = 0;
};

StatusOr<Group> groupOf(const StepContext& ctx) {
  std::vector<int64_t> axes64 = ctx.intsAttr("axes");
  std::vector<int> axes(axes64.begin(), axes64.end());
  if (!ctx.mesh) return invalid(ctx, "a collective in a plan run without a device mesh");
  for (int a : axes)
    if (a < 0 || a >= static_cast<int>(ctx.mesh->sizes().size()))
      return invalid(ctx, "names mesh axis " + std::to_string(a) + ", the mesh has " +
                              std::to_string(ctx.mesh->sizes().size()));
  Group g;
  DTC_ASSIGN_OR_RETURN(g.comm, ctx.mesh->group(axes));
  g.size = ctx.mesh->groupSize(axes);
  g.index = ctx.mesh->indexIn(axes);
  return g;
}

Status floats(const StepContext& ctx) {
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (t.dtype != DType::kF32) return invalid(ctx, "collectives reduce float32 tensors only");
  return Status::Ok();
}

// Collectives that only move data take float32 or int64 tensors; an int64 element travels as
// two float32 words. Returns the words per element.
StatusOr<int64_t> movable(const StepContext& ctx) {
  DType t = ctx.inputs.empty() ? ctx.outputs[0].dtype : ctx.inputs[0].dtype;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list)
      if (v.dtype != t || (t != DType::kF32 && t != DType::kI64))
        return invalid(ctx, "moves float32 or int64 tensors of one dtype only");
  return t == DType::kI64 ? 2 : 1;
}

TensorView words(TensorView t, int64_t perElement) {
  if (perElement != 1) {
    if (t.shape.empty()) t.shape.push_back(1);
    t.shape.back() *= perElement;
  }
  t.dtype = DType::kF32;
  return t;
}

// Checks `out` = `in` with dimension `dim` scaled by num/den; returns dim.
StatusOr<int64_t> scaledDim(const StepContext& ctx, const char* attr, const Shape& in, const Shape& out,
                            int64_t num, int64_t den) {
  int64_t dim = ctx.intAttr(attr);
  if (dim < 0 || dim >= static_cast<int64_t>(in.size()) || in.size() != out.size())
    return invalid(ctx, std::string(attr) + " " + std::to_string(dim) + " is out of range");
  Shape want = in;
  if (want[dim] * num % den != 0)
    return invalid(ctx, "dimension " + std::to_string(dim) + " of " + str(in) + " does not divide over " +
                            std::to_string(den) + " devices");
  want[dim] = want[dim] * num / den;
  if (want != out) return invalid(ctx, "output " + str(out) + " should be " + str(want));
  return dim;
}

// The run-time side: copies with error checks, and the wait before touching staging buffers.
struct Stager {
  Device* dev;
  std::string where;
  float* host(int which) const { return reinterpret_cast<float*>(dev->staging(which)); }
  Status wait() const { return cudaStatus(cudaStreamSynchronize(dev->stream()), where + "waiting for the GPU"); }
  Status copy(void* to, const void* from, int64_t floats, cudaMemcpyKind kind) const {
    return cudaStatus(cudaMemcpyAsync(to, from, floats * sizeof(float), kind, dev->stream()), where + "a copy");
  }
  Status block(float* whole, const Around& a, int64_t parts, int64_t index, float* b, bool intoWhole,
               cudaMemcpyKind kind) const {
    return cudaStatus(blockCopy(whole, a, parts, index, b, intoWhole, kind, dev->stream()), where + "a strided copy");
  }
};

StatusOr<Stager> stager(const StepContext& ctx, Device& dev, int64_t floats0, int64_t floats1) {
  DTC_RETURN_IF_ERROR(dev.reserveStaging(0, floats0 * sizeof(float)));
  DTC_RETURN_IF_ERROR(dev.reserveStaging(1, floats1 * sizeof(float)));
  return Stager{&dev, ctx.where()};
}

constexpr cudaMemcpyKind kDown = cudaMemcpyDeviceToHost, kUp = cudaMemcpyHostToDevice;

StatusOr<BoundStep> bindAllReduce(const StepContext& ctx, Device& dev) {
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
  if (max && ctx.inputs.size() > 1) return invalid(ctx, "a bucket of several tensors reduces by sum only");
  DTC_ASSIGN_OR_RETURN(Stager s, stager(ctx, dev, total, 0));
  std::vector<TensorView> ins = ctx.inputs, outs = ctx.outputs;
  // A bucket is one call on the tensors packed end to end.
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.wait());
    float* at = s.host(0);
    for (const TensorView& t : ins) {
      DTC_RETURN_IF_ERROR(s.copy(at, t.data, t.numElements(), kDown));
      at += t.numElements();
    }
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(max ? g.comm->allReduceMax(s.host(0), total) : g.comm->allReduceSum(s.host(0), total));
    at = s.host(0);
    for (const TensorView& t : outs) {
      DTC_RETURN_IF_ERROR(s.copy(t.data, at, t.numElements(), kUp));
      at += t.numElements();
    }
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAllGather(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(int64_t w, movable(ctx));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  TensorView in = words(ctx.inputs[0], w), out = words(ctx.outputs[0], w);
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, g.size, 1));
  Around a(out.shape, dim);
  int64_t n = in.numElements();
  DTC_ASSIGN_OR_RETURN(Stager s, stager(ctx, dev, n, n * g.size));
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(s.copy(s.host(0), in.data, n, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(g.comm->allGather(s.host(0), n, s.host(1)));
    for (int64_t r = 0; r < g.size; ++r)
      DTC_RETURN_IF_ERROR(s.block(out.f32(), a, g.size, r, s.host(1) + r * n, true, kUp));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindReduceScatter(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, 1, g.size));
  Around a(in.shape, dim);
  int64_t n = out.numElements();
  DTC_ASSIGN_OR_RETURN(Stager s, stager(ctx, dev, n * g.size, n));
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.wait());
    for (int64_t r = 0; r < g.size; ++r)
      DTC_RETURN_IF_ERROR(s.block(in.f32(), a, g.size, r, s.host(0) + r * n, false, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(g.comm->reduceScatterSum(s.host(0), n, s.host(1)));
    return s.copy(out.data, s.host(1), n, kUp);
  });
}

// No communication: this device's block, copied on the GPU.
StatusOr<BoundStep> bindLocalSlice(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(int64_t w, movable(ctx));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  TensorView in = words(ctx.inputs[0], w), out = words(ctx.outputs[0], w);
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, 1, g.size));
  Around a(in.shape, dim);
  const Stager s{&dev, ctx.where()};
  return BoundStep(
      [=] { return s.block(in.f32(), a, g.size, g.index, out.f32(), false, cudaMemcpyDeviceToDevice); });
}

StatusOr<BoundStep> bindAllToAll(const StepContext& ctx, Device& dev) {
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
  DTC_ASSIGN_OR_RETURN(Stager s, stager(ctx, dev, n * g.size, n * g.size));
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.wait());
    for (int64_t r = 0; r < g.size; ++r)
      DTC_RETURN_IF_ERROR(s.block(in.f32(), from, g.size, r, s.host(0) + r * n, false, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(g.comm->allToAll(s.host(0), n, s.host(1)));
    for (int64_t r = 0; r < g.size; ++r)
      DTC_RETURN_IF_ERROR(s.block(out.f32(), to, g.size, r, s.host(1) + r * n, true, kUp));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCollectiveBroadcast(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  int64_t root = ctx.intAttr("root");
  if (root < 0 || root >= g.size) return invalid(ctx, "root outside the group");
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  const int64_t n = in.numElements();
  DTC_ASSIGN_OR_RETURN(Stager s, stager(ctx, dev, n, 0));
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(s.copy(s.host(0), in.data, n, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(g.comm->broadcast(s.host(0), n, static_cast<int>(root)));
    return s.copy(out.data, s.host(0), n, kUp);
  });
}

// Point to point along a group (see the CPU table): any dtype, as bytes.
StatusOr<int> tagOf(const StepContext& ctx) {
  int64_t tag = ctx.intAttr("tag");
  if (tag < 0 || tag > comm::Communicator::kMaxTag)
    return invalid(ctx, "tag " + std::to_string(tag) + " is outside [0, " +
                            std::to_string(comm::Communicator::kMaxTag) + "]");
  return static_cast<int>(tag);
}

int64_t bytesOf(const TensorView& t) { return t.numElements() * static_cast<int64_t>(dtypeSize(t.dtype)); }

StatusOr<BoundStep> bindSend(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 1 || !ctx.outputs.empty()) return invalid(ctx, "expects 1 input and 0 outputs");
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  DTC_ASSIGN_OR_RETURN(int tag, tagOf(ctx));
  int peer = static_cast<int>(((g.index + ctx.intAttr("shift")) % g.size + g.size) % g.size);
  TensorView in = ctx.inputs[0];
  const int64_t bytes = bytesOf(in);
  DTC_ASSIGN_OR_RETURN(Stager s, stager(ctx, dev, (bytes + 3) / 4, 0));
  // The communicator copies the bytes (sends never block), so the staging buffer is free after.
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(cudaStatus(cudaMemcpyAsync(s.host(0), in.data, bytes, kDown, s.dev->stream()), s.where + "a copy"));
    DTC_RETURN_IF_ERROR(s.wait());
    return g.comm->send(s.host(0), bytes, peer, tag);
  });
}

StatusOr<BoundStep> bindRecv(const StepContext& ctx, Device& dev) {
  if (!ctx.inputs.empty() || ctx.outputs.size() != 1) return invalid(ctx, "expects 0 inputs and 1 output");
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx));
  DTC_ASSIGN_OR_RETURN(int tag, tagOf(ctx));
  int peer = static_cast<int>(((g.index - ctx.intAttr("shift")) % g.size + g.size) % g.size);
  TensorView out = ctx.outputs[0];
  const int64_t bytes = bytesOf(out);
  DTC_ASSIGN_OR_RETURN(Stager s, stager(ctx, dev, (bytes + 3) / 4, 0));
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(g.comm->recv(s.host(0), bytes, peer, tag));
    return cudaStatus(cudaMemcpyAsync(out.data, s.host(0), bytes, kUp, s.dev->stream()), s.where + "a copy");
  });
}

}  // namespace

const CudaBinderTable& collectiveCudaBinders() {
  static const CudaBinderTable table = {
      {"all_reduce", bindAllReduce},       {"all_gather", bindAllGather},
      {"reduce_scatter", bindReduceScatter}, {"local_slice", bindLocalSlice},
      {"all_to_all", bindAllToAll},       {"collective_broadcast", bindCollectiveBroadcast},
      {"send", bindSend},                 {"recv", bindRecv},
  };
  return table;
}

}  // namespace dtc::cuda
