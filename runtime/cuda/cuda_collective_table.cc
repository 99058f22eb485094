// The collectives of partitioned plans on CUDA, with the CPU backend's contracts
// (exec/cpu_collective_table.cc). Each runs on NCCL where its group does (nccl_groups.h: on
// device memory, nothing waits for the host; on the comm stream beside the compute that follows,
// see Device::overlapSlot, and CommRoute for the exception), else staged through the host: the step copies its blocks from the GPU into pinned buffers, calls the same
// Communicator method as the CPU backend and copies the result back (correct on any MPI, and
// where ranks share a GPU). Strided blocks are packed on the GPU for NCCL, as the CPU packs
// them for MPI. Sends and receives stay host-staged (see bindSend for why).
//
// A host-staged step synchronises the stream before it touches the staging buffers (its inputs
// must be computed, and an earlier step's upload from them must be done); its own uploads stay
// in flight, ordered before the kernels that follow on the stream.
#include "cuda_collective_util.h"

namespace dtc::cuda {
namespace {

constexpr cudaMemcpyKind kDown = cudaMemcpyDeviceToHost, kUp = cudaMemcpyHostToDevice,
                         kOnDevice = cudaMemcpyDeviceToDevice;

StatusOr<BoundStep> bindAllReduce(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(floats(ctx));
  if (ctx.inputs.empty() || ctx.inputs.size() != ctx.outputs.size())
    return invalid(ctx, "needs as many outputs as inputs");
  int64_t total = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[i], ctx.outputs[i]));
    total += ctx.inputs[i].numElements();
  }
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
  std::string reduction = ctx.stringAttr("reduction");
  if (reduction != "" && reduction != "sum" && reduction != "max")
    return invalid(ctx, "unknown reduction '" + reduction + "'");
  const bool max = reduction == "max";
  if (max && ctx.inputs.size() > 1) return invalid(ctx, "a bucket of several tensors reduces by sum only");
  const Stager s = stager(ctx, dev, total, 0);
  const std::vector<TensorView> ins = ctx.inputs, outs = ctx.outputs;
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        // A bucket: one call per tensor, which NCCL fuses into one launch.
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        return ncclGrouped(*nc.api, s.where, [&] {
          for (size_t i = 0; i < ins.size(); ++i)
            DTC_RETURN_IF_ERROR(nc.check(nc.api->allReduce(ins[i].data, outs[i].data, ins[i].numElements(),
                                                           ncclFloat32, max ? ncclMax : ncclSum, comm, stream),
                                         "ncclAllReduce"));
          return Status::Ok();
        });
      });
    // Host-staged: a bucket is one call on the tensors packed end to end.
    DTC_RETURN_IF_ERROR(s.reserve());
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

// Device memory for NCCL's contiguous blocks when a step's blocks are strided (`needed`), shared
// by every collective step on the same stream (Device::sharedScratch slot 1 on the compute
// stream, 2 on the comm stream); null otherwise.
StatusOr<float*> packing(Device& dev, bool needed, int64_t floats, const CommRoute& route) {
  if (!needed) return static_cast<float*>(nullptr);
  DTC_ASSIGN_OR_RETURN(void* p, dev.sharedScratch(route.slot >= 0 ? Device::kCommPackingSlot : 1,
                                                  floats * sizeof(float)));
  return static_cast<float*>(p);
}

StatusOr<BoundStep> bindAllGather(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(int64_t w, movable(ctx));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
  TensorView in = words(ctx.inputs[0], w), out = words(ctx.outputs[0], w);
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, g.size, 1));
  Around a(out.shape, dim);
  int64_t n = in.numElements();
  const Stager s = stager(ctx, dev, n, n * g.size);
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  // Rank r's block of `out` is contiguous (at r·n) only when nothing precedes `dim`.
  DTC_ASSIGN_OR_RETURN(float* packed, packing(dev, a.outer > 1, n * g.size, route));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        float* gathered = packed ? packed : out.f32();
        DTC_RETURN_IF_ERROR(
            nc.check(nc.api->allGather(in.data, gathered, n, ncclFloat32, comm, stream), "ncclAllGather"));
        if (packed)
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(s.blockOn(stream, out.f32(), a, g.size, r, packed + r * n, true, kOnDevice));
        return Status::Ok();
      });
    DTC_RETURN_IF_ERROR(s.reserve());
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
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, 1, g.size));
  Around a(in.shape, dim);
  int64_t n = out.numElements();
  const Stager s = stager(ctx, dev, n * g.size, n);
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  DTC_ASSIGN_OR_RETURN(float* packed, packing(dev, a.outer > 1, n * g.size, route));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        const float* blocks = in.f32();
        if (packed) {
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(s.blockOn(stream, in.f32(), a, g.size, r, packed + r * n, false, kOnDevice));
          blocks = packed;
        }
        return nc.check(nc.api->reduceScatter(blocks, out.data, n, ncclFloat32, ncclSum, comm, stream),
                        "ncclReduceScatter");
      });
    DTC_RETURN_IF_ERROR(s.reserve());
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
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
  TensorView in = words(ctx.inputs[0], w), out = words(ctx.outputs[0], w);
  DTC_ASSIGN_OR_RETURN(int64_t dim, scaledDim(ctx, "dim", in.shape, out.shape, 1, g.size));
  Around a(in.shape, dim);
  const Stager s = stager(ctx, dev, 0, 0);
  return BoundStep([=] { return s.block(in.f32(), a, g.size, g.index, out.f32(), false, kOnDevice); });
}

StatusOr<BoundStep> bindAllToAll(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1) return invalid(ctx, "needs one input and one output");
  DTC_ASSIGN_OR_RETURN(int64_t w, movable(ctx));
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
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
  const Stager s = stager(ctx, dev, n * g.size, n * g.size);
  // NCCL sends and receives contiguous blocks: the blocks to send packed in the first half, the
  // received ones landing in the second, where either side is strided.
  const bool packFrom = from.outer > 1, packTo = to.outer > 1;
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  DTC_ASSIGN_OR_RETURN(float* packed, packing(dev, packFrom || packTo, 2 * n * g.size, route));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        const float* send = in.f32();
        float* recv = packTo ? packed + n * g.size : out.f32();
        if (packFrom) {
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(s.blockOn(stream, in.f32(), from, g.size, r, packed + r * n, false, kOnDevice));
          send = packed;
        }
        DTC_RETURN_IF_ERROR(ncclGrouped(*nc.api, s.where, [&] {
          for (int r = 0; r < static_cast<int>(g.size); ++r) {
            DTC_RETURN_IF_ERROR(nc.check(nc.api->send(send + r * n, n, ncclFloat32, r, comm, stream), "ncclSend"));
            DTC_RETURN_IF_ERROR(nc.check(nc.api->recv(recv + r * n, n, ncclFloat32, r, comm, stream), "ncclRecv"));
          }
          return Status::Ok();
        }));
        if (packTo)
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(s.blockOn(stream, out.f32(), to, g.size, r, recv + r * n, true, kOnDevice));
        return Status::Ok();
      });
    DTC_RETURN_IF_ERROR(s.reserve());
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
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
  int64_t root = ctx.intAttr("root");
  if (root < 0 || root >= g.size) return invalid(ctx, "root outside the group");
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  const int64_t n = in.numElements();
  const Stager s = stager(ctx, dev, n, 0);
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        return nc.check(nc.api->broadcast(in.data, out.data, n, ncclFloat32, static_cast<int>(root), comm, stream),
                        "ncclBroadcast");
      });
    DTC_RETURN_IF_ERROR(s.reserve());
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(s.copy(s.host(0), in.data, n, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(g.comm->broadcast(s.host(0), n, static_cast<int>(root)));
    return s.copy(out.data, s.host(0), n, kUp);
  });
}

// Point to point along a group (see the CPU table): any dtype, as bytes, always host-staged.
StatusOr<int> tagOf(const StepContext& ctx) {
  int64_t tag = ctx.intAttr("tag");
  if (tag < 0 || tag > comm::Communicator::kMaxTag)
    return invalid(ctx, "tag " + std::to_string(tag) + " is outside [0, " +
                            std::to_string(comm::Communicator::kMaxTag) + "]");
  return static_cast<int>(tag);
}

int64_t bytesOf(const TensorView& t) { return t.numElements() * static_cast<int64_t>(dtypeSize(t.dtype)); }

// Why not NCCL: beyond what NCCL's buffers hold, ncclSend holds the stream until the peer has
// posted the matching ncclRecv, so in 1F1B's steady state, where neighbouring stages send to
// each other at the same time (docs/design.md, "Pipeline parallelism"), both streams would wait
// in their sends for receives queued behind them (the compiler's deadlock check assumes sends
// never block). NCCL's transfers also have no tags: a pair must be received in the order it was
// sent, while the plan's tagged transfers may be received in any order. Batching a step's sends
// and receives into one NCCL group, as Megatron does, needs the schedule to pair them: later.
StatusOr<BoundStep> bindSend(const StepContext& ctx, Device& dev) {
  if (ctx.inputs.size() != 1 || !ctx.outputs.empty()) return invalid(ctx, "expects 1 input and 0 outputs");
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
  DTC_ASSIGN_OR_RETURN(int tag, tagOf(ctx));
  int peer = static_cast<int>(((g.index + ctx.intAttr("shift")) % g.size + g.size) % g.size);
  TensorView in = ctx.inputs[0];
  const int64_t bytes = bytesOf(in);
  const Stager s = stager(ctx, dev, (bytes + 3) / 4, 0);
  dev.markHostSynchronizing();  // never in a CUDA graph
  // The communicator copies the bytes (sends never block), so the staging buffer is free after.
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.reserve());
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(
        cudaStatus(cudaMemcpyAsync(s.host(0), in.data, bytes, kDown, s.dev->stream()), s.where + "a copy"));
    DTC_RETURN_IF_ERROR(s.wait());
    return g.comm->send(s.host(0), bytes, peer, tag);
  });
}

StatusOr<BoundStep> bindRecv(const StepContext& ctx, Device& dev) {
  if (!ctx.inputs.empty() || ctx.outputs.size() != 1) return invalid(ctx, "expects 0 inputs and 1 output");
  DTC_ASSIGN_OR_RETURN(Group g, groupOf(ctx, dev));
  DTC_ASSIGN_OR_RETURN(int tag, tagOf(ctx));
  int peer = static_cast<int>(((g.index - ctx.intAttr("shift")) % g.size + g.size) % g.size);
  TensorView out = ctx.outputs[0];
  const int64_t bytes = bytesOf(out);
  const Stager s = stager(ctx, dev, (bytes + 3) / 4, 0);
  dev.markHostSynchronizing();  // never in a CUDA graph
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.reserve());
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
