// Shared pieces of the CUDA collective binders (cuda_collective_table.cc): the CPU's contracts
// (exec/collective_contract.h) and the two ways a step runs, host-staged through MPI (Stager) or
// on NCCL (Nccl).
#pragma once

#include <string>
#include <vector>

#include "cuda_bind.h"
#include "exec/collective_contract.h"

namespace dtc::cuda {

// Block `index` of `parts` along the middle dimension of `whole` ([outer, mid, inner] floats)
// from or into `block` (contiguous [outer, mid/parts, inner]); one strided 2-D copy.
inline cudaError_t blockCopy(float* whole, const Around& a, int64_t parts, int64_t index,
                             float* block, bool intoWhole, cudaMemcpyKind kind,
                             cudaStream_t stream) {
  const int64_t m = a.mid / parts;
  const size_t run = m * a.inner * sizeof(float), pitch = a.mid * a.inner * sizeof(float);
  if (run == 0 || a.outer == 0) return cudaSuccess;
  float* at = whole + index * m * a.inner;
  return intoWhole ? cudaMemcpy2DAsync(at, pitch, block, run, run, a.outer, kind, stream)
                   : cudaMemcpy2DAsync(block, run, at, pitch, run, a.outer, kind, stream);
}

// This device's group over the step's mesh axes (the contract's CollectiveGroup), and where its
// collectives run.
struct Group : CollectiveGroup {
  NcclGroups* paths = nullptr;
  // The group's NCCL communicator, or null when its collectives are host-staged. The first call
  // for a group decides and creates, collectively (nccl_groups.cc): call it from bound steps
  // only, when they run.
  StatusOr<ncclComm_t> nccl() const { return paths->comm(axes, *comm); }
};

inline Group groupOn(const CollectiveGroup& g, Device& dev) { return Group{g, &dev.collectives()}; }

// The run-time side of the host-staged path: pinned staging buffers (reserved when the step
// first runs this path: NCCL groups never need them), copies with error checks, and the wait
// before touching staging buffers. Both wait for the GPU, which keeps the step out of CUDA
// graphs: they tell the Device so.
struct Stager {
  Device* dev;
  std::string where;
  int64_t floats0 = 0, floats1 = 0;  // the staging each buffer needs
  Status reserve() const {
    dev->markHostSynchronizing();
    DTC_RETURN_IF_ERROR(dev->reserveStaging(0, floats0 * sizeof(float)));
    return dev->reserveStaging(1, floats1 * sizeof(float));
  }
  float* host(int which) const { return reinterpret_cast<float*>(dev->staging(which)); }
  Status wait() const {
    dev->markHostSynchronizing();
    return cudaStatus(cudaStreamSynchronize(dev->stream()), where + "waiting for the GPU");
  }
  Status copy(void* to, const void* from, int64_t floats, cudaMemcpyKind kind) const {
    return copyBytes(to, from, floats * static_cast<int64_t>(sizeof(float)), kind);
  }
  // The same in bytes: tensors of any dtype moved as bytes (sends, receives, ring shifts).
  Status copyBytes(void* to, const void* from, int64_t bytes, cudaMemcpyKind kind) const {
    return cudaStatus(cudaMemcpyAsync(to, from, bytes, kind, dev->stream()), where + "a copy");
  }
  Status block(float* whole, const Around& a, int64_t parts, int64_t index, float* b,
               bool intoWhole, cudaMemcpyKind kind) const {
    return blockOn(dev->stream(), whole, a, parts, index, b, intoWhole, kind);
  }
  // The NCCL path's packing, on the stream its collective runs on.
  Status blockOn(cudaStream_t stream, float* whole, const Around& a, int64_t parts, int64_t index,
                 float* b, bool intoWhole, cudaMemcpyKind kind) const {
    return cudaStatus(blockCopy(whole, a, parts, index, b, intoWhole, kind, stream),
                      where + "a strided copy");
  }
};

inline Stager stager(const StepContext& ctx, Device& dev, int64_t floats0, int64_t floats1) {
  return Stager{&dev, ctx.where(), floats0, floats1};
}

// Where a collective's NCCL path runs: on the comm stream, beside the compute that follows
// (Device::overlapSlot; `slot` >= 0), else on the compute stream. run() brackets the NCCL calls
// and their packing copies, `body(stream)`; the completion is recorded even when they fail, so
// the comm stream is always joined again (a graph capture fails on a fork left unjoined).
//
// On the compute stream, the collective first waits for every one pending on the comm stream:
// NCCL does not order kernels of one communicator issued to two streams, and two collectives of
// a group running at once in different orders on different ranks can hang. So NCCL calls run in
// the order they are issued, whichever stream they are on (comm-stream ones start after the
// compute stream's earlier work, forkComm).
struct CommRoute {
  Device* dev;
  int slot = -1;
  template <typename Body>
  Status run(Body&& body) const {
    if (slot < 0) {
      DTC_RETURN_IF_ERROR(dev->joinAll());
      return body(dev->stream());
    }
    DTC_ASSIGN_OR_RETURN(cudaStream_t stream, dev->forkComm(slot));
    Status ran = body(stream);
    Status joined = dev->joinLater(slot);
    return ran.ok() ? joined : ran;
  }
};

inline StatusOr<CommRoute> commRoute(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(int slot, dev.overlapSlot(ctx));
  return CommRoute{&dev, slot};
}

// The run-time side of the NCCL path: calls on the collective's stream, results as Status.
struct Nccl {
  const NcclApi* api;
  ncclComm_t comm;
  cudaStream_t stream;
  const std::string& where;
  Status check(ncclResult_t result, const char* call) const {
    return ncclStatus(*api, result, where + call);
  }
};

}  // namespace dtc::cuda
