// The collectives of partitioned plans on CUDA, with the CPU backend's contracts
// (exec/collective_contract.h). Each runs on NCCL where its group does (nccl_groups.h: on
// device memory, nothing waits for the host; on the comm stream beside the compute that follows,
// see Device::overlapSlot, and CommRoute for the exception), else staged through the host: the step
// copies its blocks from the GPU into pinned buffers, calls the same Communicator method as the CPU
// backend and copies the result back (correct on any MPI, and where ranks share a GPU). Strided
// blocks are packed on the GPU for NCCL, as the CPU packs them for MPI. Sends and receives stay
// host-staged (see bindSend for why).
//
// A host-staged step synchronises the stream before it touches the staging buffers (its inputs
// must be computed, and an earlier step's upload from them must be done); its own uploads stay
// in flight, ordered before the kernels that follow on the stream.
#include "cuda_collective_util.h"
#include "planfile/communication.h"

namespace dtc::cuda {
namespace {

constexpr cudaMemcpyKind kDown = cudaMemcpyDeviceToHost, kUp = cudaMemcpyHostToDevice,
                         kOnDevice = cudaMemcpyDeviceToDevice;

StatusOr<BoundStep> bindAllReduce(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(AllReduceStep r, checkAllReduce(ctx));
  const Group g = groupOn(r.group, dev);
  const int64_t total = r.total;
  const bool max = r.max;
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
            DTC_RETURN_IF_ERROR(
                nc.check(nc.api->allReduce(ins[i].data, outs[i].data, ins[i].numElements(),
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
    DTC_RETURN_IF_ERROR(max ? g.comm->allReduceMax(s.host(0), total)
                            : g.comm->allReduceSum(s.host(0), total));
    at = s.host(0);
    for (const TensorView& t : outs) {
      DTC_RETURN_IF_ERROR(s.copy(t.data, at, t.numElements(), kUp));
      at += t.numElements();
    }
    return Status::Ok();
  });
}

// Device memory for NCCL's contiguous blocks when a step's blocks are strided (`needed`): the
// step's scratch (collectivePackingFloats in ops/step_scratch.h sizes it; the hazards of the comm
// stream cover it, as they cover the operands), else shared by every collective step on the same
// stream (Device::sharedScratch slot 1 on the compute stream, 2 on the comm stream); null
// otherwise.
StatusOr<float*> packing(const StepContext& ctx, Device& dev, bool needed, int64_t floats,
                         const CommRoute& route) {
  if (!needed) return static_cast<float*>(nullptr);
  DTC_ASSIGN_OR_RETURN(uint8_t * p, stepScratch(ctx, dev, floats * sizeof(float),
                                                route.slot >= 0 ? Device::kCommPackingSlot : 1));
  return reinterpret_cast<float*>(p);
}

StatusOr<BoundStep> bindAllGather(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(BlockStep b, checkAllGather(ctx));
  const Group g = groupOn(b.group, dev);
  TensorView in = b.in, out = b.out;
  Around a(out.shape, b.dim);
  int64_t n = in.numElements();
  const Stager s = stager(ctx, dev, n, n * g.size);
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  // Rank r's block of `out` is contiguous (at r·n) only when nothing precedes `dim`.
  DTC_ASSIGN_OR_RETURN(float* packed, packing(ctx, dev, a.outer > 1, n * g.size, route));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        float* gathered = packed ? packed : out.f32();
        DTC_RETURN_IF_ERROR(nc.check(
            nc.api->allGather(in.data, gathered, n, ncclFloat32, comm, stream), "ncclAllGather"));
        if (packed)
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(
                s.blockOn(stream, out.f32(), a, g.size, r, packed + r * n, true, kOnDevice));
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
  DTC_ASSIGN_OR_RETURN(BlockStep b, checkReduceScatter(ctx));
  const Group g = groupOn(b.group, dev);
  TensorView in = b.in, out = b.out;
  Around a(in.shape, b.dim);
  int64_t n = out.numElements();
  const Stager s = stager(ctx, dev, n * g.size, n);
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  DTC_ASSIGN_OR_RETURN(float* packed, packing(ctx, dev, a.outer > 1, n * g.size, route));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        const float* blocks = in.f32();
        if (packed) {
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(
                s.blockOn(stream, in.f32(), a, g.size, r, packed + r * n, false, kOnDevice));
          blocks = packed;
        }
        return nc.check(
            nc.api->reduceScatter(blocks, out.data, n, ncclFloat32, ncclSum, comm, stream),
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

}  // namespace

// Sums and gathers of 16-bit tensors on NCCL in their own type: half the bytes of the f32 form,
// as Megatron-LM and PyTorch reduce and gather activations (a gather moves the bits unchanged).
// Where the group has no NCCL communicator, or a reduce-scatter's or gather's blocks are strided,
// `widened` runs instead (the f32 form on widened copies, packed and host-staged as the f32
// collectives are). Views with f32 element types check the operands against the f32 contracts:
// the shapes are the same.
namespace {

StepContext asFloat32(const StepContext& ctx) {
  StepContext f32{ctx.step, ctx.inputs, ctx.outputs, ctx.pool, ctx.mesh};
  for (auto* list : {&f32.inputs, &f32.outputs})
    for (TensorView& t : *list) t.dtype = DType::kF32;
  return f32;
}

ncclDataType_t ncclTypeOf(DType t) { return t == DType::kBF16 ? ncclBfloat16 : ncclFloat16; }

// `call` on NCCL where the group has a communicator, else `widened`.
template <typename Call>
StatusOr<BoundStep> onNcclElse(const StepContext& ctx, Device& dev, const CollectiveGroup& group,
                               BoundStep widened, Call call) {
  const Group g = groupOn(group, dev);
  const std::string where = ctx.where();
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (!comm) return widened();
    return route.run([&](cudaStream_t stream) {
      return call(Nccl{&g.paths->api(), comm, stream, where});
    });
  });
}

}  // namespace

StatusOr<BoundStep> bindHalfAllReduce(const StepContext& ctx, Device& dev, BoundStep widened) {
  DTC_ASSIGN_OR_RETURN(AllReduceStep r, checkAllReduce(asFloat32(ctx)));
  if (!nativeHalfCollective(plan::Kernel::all_reduce, r.max, {}, 0)) return widened;
  const ncclDataType_t type = ncclTypeOf(ctx.inputs[0].dtype);
  const std::vector<TensorView> ins = ctx.inputs, outs = ctx.outputs;
  return onNcclElse(ctx, dev, r.group, std::move(widened), [=](const Nccl& nc) {
    return ncclGrouped(*nc.api, nc.where, [&] {
      for (size_t i = 0; i < ins.size(); ++i)
        DTC_RETURN_IF_ERROR(
            nc.check(nc.api->allReduce(ins[i].data, outs[i].data, ins[i].numElements(), type,
                                       ncclSum, nc.comm, nc.stream),
                     "ncclAllReduce"));
      return Status::Ok();
    });
  });
}

// A reduce-scatter (gather false) or all-gather (true) whose blocks are contiguous: nothing
// precedes `dim` in the whole tensor.
StatusOr<BoundStep> bindHalfBlocks(const StepContext& ctx, Device& dev, BoundStep widened,
                                   bool gather) {
  const StepContext f32 = asFloat32(ctx);
  DTC_ASSIGN_OR_RETURN(BlockStep b, gather ? checkAllGather(f32) : checkReduceScatter(f32));
  if (!nativeHalfCollective(gather ? plan::Kernel::all_gather : plan::Kernel::reduce_scatter, false,
                            gather ? b.out.shape : b.in.shape, b.dim))
    return widened;
  const ncclDataType_t type = ncclTypeOf(ctx.inputs[0].dtype);
  const void* in = ctx.inputs[0].data;
  void* out = ctx.outputs[0].data;
  const size_t block = static_cast<size_t>((gather ? ctx.inputs : ctx.outputs)[0].numElements());
  return onNcclElse(ctx, dev, b.group, std::move(widened), [=](const Nccl& nc) {
    return gather
               ? nc.check(nc.api->allGather(in, out, block, type, nc.comm, nc.stream),
                          "ncclAllGather")
               : nc.check(nc.api->reduceScatter(in, out, block, type, ncclSum, nc.comm, nc.stream),
                          "ncclReduceScatter");
  });
}

StatusOr<BoundStep> bindHalfReduceScatter(const StepContext& ctx, Device& dev, BoundStep widened) {
  return bindHalfBlocks(ctx, dev, std::move(widened), false);
}

StatusOr<BoundStep> bindHalfAllGather(const StepContext& ctx, Device& dev, BoundStep widened) {
  return bindHalfBlocks(ctx, dev, std::move(widened), true);
}

namespace {

// No communication: this device's block, copied on the GPU.
StatusOr<BoundStep> bindLocalSlice(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(BlockStep b, checkLocalSlice(ctx));
  const int64_t size = b.group.size, index = b.group.index;
  TensorView in = b.in, out = b.out;
  Around a(in.shape, b.dim);
  const Stager s = stager(ctx, dev, 0, 0);
  return BoundStep([=] { return s.block(in.f32(), a, size, index, out.f32(), false, kOnDevice); });
}

// The first member keeps x; the others write zeros (no communication).
StatusOr<BoundStep> bindCountOnce(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const bool keep, checkCountOnce(ctx));
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  const size_t bytes = out.numElements() * sizeof(float);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=]() -> Status {
    if (!keep) return launched(cudaMemsetAsync(out.data, 0, bytes, stream), where);
    if (in.data == out.data) return Status::Ok();
    return launched(cudaMemcpyAsync(out.data, in.data, bytes, cudaMemcpyDeviceToDevice, stream),
                    where);
  });
}

StatusOr<BoundStep> bindAllToAll(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(AllToAllStep a, checkAllToAll(ctx));
  const Group g = groupOn(a.group, dev);
  TensorView in = a.in, out = a.out;
  int64_t n = in.numElements() / g.size;
  Around from(in.shape, a.split), to(out.shape, a.concat);
  const Stager s = stager(ctx, dev, n * g.size, n * g.size);
  // NCCL sends and receives contiguous blocks: the blocks to send packed in the first half, the
  // received ones landing in the second, where either side is strided.
  const bool packFrom = from.outer > 1, packTo = to.outer > 1;
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  DTC_ASSIGN_OR_RETURN(float* packed, packing(ctx, dev, packFrom || packTo, 2 * n * g.size, route));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        const float* send = in.f32();
        float* recv = packTo ? packed + n * g.size : out.f32();
        if (packFrom) {
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(
                s.blockOn(stream, in.f32(), from, g.size, r, packed + r * n, false, kOnDevice));
          send = packed;
        }
        DTC_RETURN_IF_ERROR(ncclGrouped(*nc.api, s.where, [&] {
          for (int r = 0; r < static_cast<int>(g.size); ++r) {
            DTC_RETURN_IF_ERROR(
                nc.check(nc.api->send(send + r * n, n, ncclFloat32, r, comm, stream), "ncclSend"));
            DTC_RETURN_IF_ERROR(
                nc.check(nc.api->recv(recv + r * n, n, ncclFloat32, r, comm, stream), "ncclRecv"));
          }
          return Status::Ok();
        }));
        if (packTo)
          for (int64_t r = 0; r < g.size; ++r)
            DTC_RETURN_IF_ERROR(
                s.blockOn(stream, out.f32(), to, g.size, r, recv + r * n, true, kOnDevice));
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
  DTC_ASSIGN_OR_RETURN(BroadcastStep b, checkCollectiveBroadcast(ctx));
  const Group g = groupOn(b.group, dev);
  const int root = b.root;
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  const int64_t n = in.numElements();
  const Stager s = stager(ctx, dev, n, 0);
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        return nc.check(nc.api->broadcast(in.data, out.data, n, ncclFloat32, root, comm, stream),
                        "ncclBroadcast");
      });
    DTC_RETURN_IF_ERROR(s.reserve());
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(s.copy(s.host(0), in.data, n, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(g.comm->broadcast(s.host(0), n, root));
    return s.copy(out.data, s.host(0), n, kUp);
  });
}

// A ring's step: every member sends to the next and receives from the previous at once, so one
// NCCL group of a send and a receive cannot deadlock (unlike the pipeline's transfers below), and
// it runs on the comm stream beside the attention of the block already here. Bytes, any dtype.
StatusOr<BoundStep> bindRingShift(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const RingShiftStep r, checkRingShift(ctx));
  const Group g = groupOn(r.group, dev);
  const uint8_t* in = ctx.inputs[0].data;
  uint8_t* out = ctx.outputs[0].data;
  const int64_t floats = (r.bytes + 3) / 4;
  const Stager s = stager(ctx, dev, floats, floats);
  DTC_ASSIGN_OR_RETURN(CommRoute route, commRoute(ctx, dev));
  return BoundStep([=]() -> Status {
    DTC_ASSIGN_OR_RETURN(ncclComm_t comm, g.nccl());
    if (comm)
      return route.run([&](cudaStream_t stream) {
        const Nccl nc{&g.paths->api(), comm, stream, s.where};
        return ncclGrouped(*nc.api, s.where, [&] {
          DTC_RETURN_IF_ERROR(
              nc.check(nc.api->send(in, r.bytes, ncclUint8, r.to, comm, stream), "ncclSend"));
          return nc.check(nc.api->recv(out, r.bytes, ncclUint8, r.from, comm, stream), "ncclRecv");
        });
      });
    DTC_RETURN_IF_ERROR(s.reserve());
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(s.copyBytes(s.host(0), in, r.bytes, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(r.group.comm->shift(s.host(0), s.host(1), r.bytes, r.to, r.from));
    return s.copyBytes(out, s.host(1), r.bytes, kUp);
  });
}

// Point to point along a group (see exec/collective_contract.h): any dtype, as bytes, always
// host-staged.
//
// Why not NCCL: beyond what NCCL's buffers hold, ncclSend holds the stream until the peer has
// posted the matching ncclRecv, so in 1F1B's steady state, where neighbouring stages send to
// each other at the same time (docs/design.md, "Pipeline parallelism"), both streams would wait
// in their sends for receives queued behind them (the compiler's deadlock check assumes sends
// never block). NCCL's transfers also have no tags: a pair must be received in the order it was
// sent, while the plan's tagged transfers may be received in any order. Batching a step's sends
// and receives into one NCCL group, as Megatron does, needs the schedule to pair them: later.
// The staging of a send or receive, whose steps never run in a CUDA graph.
Stager pointToPointStager(const StepContext& ctx, Device& dev, const PointToPointStep& p) {
  const Stager s = stager(ctx, dev, (p.bytes + 3) / 4, 0);
  dev.markHostSynchronizing();
  return s;
}

StatusOr<BoundStep> bindSend(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const PointToPointStep p, checkSend(ctx));
  const uint8_t* data = ctx.inputs[0].data;
  const Stager s = pointToPointStager(ctx, dev, p);
  // The communicator copies the bytes (sends never block), so the staging buffer is free after.
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.reserve());
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(s.copyBytes(s.host(0), data, p.bytes, kDown));
    DTC_RETURN_IF_ERROR(s.wait());
    return p.group.comm->send(s.host(0), p.bytes, p.peer, p.tag);
  });
}

StatusOr<BoundStep> bindRecv(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const PointToPointStep p, checkRecv(ctx));
  uint8_t* data = ctx.outputs[0].data;
  const Stager s = pointToPointStager(ctx, dev, p);
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(s.reserve());
    DTC_RETURN_IF_ERROR(s.wait());
    DTC_RETURN_IF_ERROR(p.group.comm->recv(s.host(0), p.bytes, p.peer, p.tag));
    return s.copyBytes(data, s.host(0), p.bytes, kUp);
  });
}

}  // namespace

DTC_CUDA_BINDER(all_reduce, bindAllReduce)
DTC_CUDA_BINDER(all_gather, bindAllGather)
DTC_CUDA_BINDER(reduce_scatter, bindReduceScatter)
DTC_CUDA_BINDER(local_slice, bindLocalSlice)
DTC_CUDA_BINDER(all_to_all, bindAllToAll)
DTC_CUDA_BINDER(collective_broadcast, bindCollectiveBroadcast)
DTC_CUDA_BINDER(send, bindSend)
DTC_CUDA_BINDER(recv, bindRecv)
DTC_CUDA_BINDER(count_once, bindCountOnce)
DTC_CUDA_BINDER(ring_shift, bindRingShift)

}  // namespace dtc::cuda
