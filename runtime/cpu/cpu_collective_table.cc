// The collectives of partitioned plans on the CPU backend, with the contracts of
// exec/collective_contract.h: each step runs over the communicator of its mesh-axis group.
// Tensors are row-major; a block along dimension d is strided unless nothing precedes d, so
// such steps pack blocks, and buckets their tensors, into the step's planned scratch
// (ops/step_scratch.h) around the communicator call. The others work on their operands.
#include <cstring>
#include <memory>

#include "cpu/cpu_binders.h"
#include "exec/collective_contract.h"

namespace dtc {
namespace {

// Room to pack `floats` floats (stepBuffer), kept alive by the step that captures it.
struct Packing {
  StepBuffer buffer;
  float* data;
};

Packing packing(const StepContext& ctx, uint64_t floats) {
  StepBuffer buffer = stepBuffer(ctx, floats * sizeof(float));
  float* data = reinterpret_cast<float*>(buffer.data);
  return {std::move(buffer), data};
}

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

StatusOr<BoundStep> bindAllReduce(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(AllReduceStep r, checkAllReduce(ctx));
  const CollectiveGroup g = r.group;
  const bool max = r.max;
  const int64_t total = r.total;
  std::vector<TensorView> ins = ctx.inputs, outs = ctx.outputs;
  if (ins.size() == 1) {
    TensorView in = ins[0], out = outs[0];
    return BoundStep([=] {
      if (in.data != out.data) std::memcpy(out.data, in.data, in.numElements() * sizeof(float));
      return max ? g.comm->allReduceMax(out.f32(), out.numElements())
                 : g.comm->allReduceSum(out.f32(), out.numElements());
    });
  }
  // A bucket (summed: checkAllReduce refuses a max): one call on the tensors packed end to end.
  const Packing staging = packing(ctx, static_cast<uint64_t>(total));
  return BoundStep([=] {
    float* at = staging.data;
    for (const TensorView& t : ins) {
      std::memcpy(at, t.data, t.numElements() * sizeof(float));
      at += t.numElements();
    }
    DTC_RETURN_IF_ERROR(g.comm->allReduceSum(staging.data, total));
    at = staging.data;
    for (const TensorView& t : outs) {
      std::memcpy(t.data, at, t.numElements() * sizeof(float));
      at += t.numElements();
    }
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAllGather(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BlockStep b, checkAllGather(ctx));
  const CollectiveGroup g = b.group;
  TensorView in = b.in, out = b.out;
  Around a(out.shape, b.dim);
  int64_t n = in.numElements();
  if (a.outer == 1)  // rank r's block is the r-th run of the output
    return BoundStep([=] { return g.comm->allGather(in.f32(), n, out.f32()); });
  const Packing staging = packing(ctx, static_cast<uint64_t>(n * g.size));
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(g.comm->allGather(in.f32(), n, staging.data));
    for (int64_t r = 0; r < g.size; ++r) insertBlock(out.f32(), a, g.size, r, staging.data + r * n);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindReduceScatter(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BlockStep b, checkReduceScatter(ctx));
  const CollectiveGroup g = b.group;
  TensorView in = b.in, out = b.out;
  Around a(in.shape, b.dim);
  int64_t n = out.numElements();
  if (a.outer == 1)  // the input is already rank 0's block, then rank 1's, ...
    return BoundStep([=] { return g.comm->reduceScatterSum(in.f32(), n, out.f32()); });
  const Packing staging = packing(ctx, static_cast<uint64_t>(n * g.size));
  return BoundStep([=] {
    for (int64_t r = 0; r < g.size; ++r) extractBlock(in.f32(), a, g.size, r, staging.data + r * n);
    return g.comm->reduceScatterSum(staging.data, n, out.f32());
  });
}

StatusOr<BoundStep> bindLocalSlice(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BlockStep b, checkLocalSlice(ctx));
  const int64_t size = b.group.size, index = b.group.index;
  TensorView in = b.in, out = b.out;
  Around a(in.shape, b.dim);
  return BoundStep([=] {
    extractBlock(in.f32(), a, size, index, out.f32());
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAllToAll(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(AllToAllStep s, checkAllToAll(ctx));
  const CollectiveGroup g = s.group;
  TensorView in = s.in, out = s.out;
  int64_t n = in.numElements() / g.size;
  Around from(in.shape, s.split), to(out.shape, s.concat);
  if (from.outer == 1 && to.outer == 1)
    return BoundStep([=] { return g.comm->allToAll(in.f32(), n, out.f32()); });
  // The blocks sent, then the blocks received.
  const Packing staging = packing(ctx, static_cast<uint64_t>(2 * n * g.size));
  return BoundStep([=] {
    float* send = staging.data;
    float* recv = staging.data + n * g.size;
    for (int64_t r = 0; r < g.size; ++r) extractBlock(in.f32(), from, g.size, r, send + r * n);
    DTC_RETURN_IF_ERROR(g.comm->allToAll(send, n, recv));
    for (int64_t r = 0; r < g.size; ++r) insertBlock(out.f32(), to, g.size, r, recv + r * n);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCollectiveBroadcast(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(BroadcastStep b, checkCollectiveBroadcast(ctx));
  comm::Communicator* comm = b.group.comm;
  const int root = b.root;
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  return BoundStep([=] {
    if (in.data != out.data) std::memcpy(out.data, in.data, in.numElements() * sizeof(float));
    return comm->broadcast(out.f32(), out.numElements(), root);
  });
}

StatusOr<BoundStep> bindCountOnce(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const bool keep, checkCountOnce(ctx));
  TensorView in = ctx.inputs[0], out = ctx.outputs[0];
  return BoundStep([=] {
    const size_t bytes = out.numElements() * sizeof(float);
    if (!keep)
      std::memset(out.data, 0, bytes);
    else if (in.data != out.data)
      std::memcpy(out.data, in.data, bytes);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSend(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const PointToPointStep p, checkSend(ctx));
  const uint8_t* data = ctx.inputs[0].data;
  // Buffered: the communicator copies the bytes, so the arena may reuse them at once.
  return BoundStep([=] { return p.group.comm->send(data, p.bytes, p.peer, p.tag); });
}

StatusOr<BoundStep> bindRecv(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const PointToPointStep p, checkRecv(ctx));
  uint8_t* data = ctx.outputs[0].data;
  return BoundStep([=] { return p.group.comm->recv(data, p.bytes, p.peer, p.tag); });
}

StatusOr<BoundStep> bindRingShift(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const RingShiftStep r, checkRingShift(ctx));
  const uint8_t* in = ctx.inputs[0].data;
  uint8_t* out = ctx.outputs[0].data;
  return BoundStep([=] { return r.group.comm->shift(in, out, r.bytes, r.to, r.from); });
}

}  // namespace

DTC_CPU_BINDER(all_reduce, bindAllReduce)
DTC_CPU_BINDER(all_gather, bindAllGather)
DTC_CPU_BINDER(reduce_scatter, bindReduceScatter)
DTC_CPU_BINDER(local_slice, bindLocalSlice)
DTC_CPU_BINDER(all_to_all, bindAllToAll)
DTC_CPU_BINDER(collective_broadcast, bindCollectiveBroadcast)
DTC_CPU_BINDER(send, bindSend)
DTC_CPU_BINDER(recv, bindRecv)
DTC_CPU_BINDER(count_once, bindCountOnce)
DTC_CPU_BINDER(ring_shift, bindRingShift)

}  // namespace dtc
