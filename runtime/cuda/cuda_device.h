// What the CUDA binders see of the backend: its streams and cuBLAS handle, and resources bound
// steps keep for their life (scratch memory, error flags, host staging buffers). One Device per
// backend; every kernel and copy runs on its compute stream, in plan order, except the NCCL
// collectives, which run on a second (comm) stream so they overlap the compute that follows
// (see "Collectives beside compute" below).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/step.h"
#include "exec/stream_hazards.h"
#include "nccl_groups.h"
#include "support/status.h"

namespace dtc::cuda {

class Device {
 public:
  // Selects GPU `ordinal` (cudaSetDevice), creates the stream and handles, and reads how
  // collectives run (nccl_groups.h; an error for a bad DTC_COLLECTIVES).
  static StatusOr<std::unique_ptr<Device>> create(int ordinal);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int ordinal() const { return ordinal_; }
  const std::string& description() const { return description_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t blas() const { return blas_; }
  // TF32 tensor-core GEMMs (DTC_CUDA_TF32=1): faster, but ~1e-3 relative error, so off by
  // default to keep fp32 parity with the CPU backend.
  bool tf32() const { return tf32_; }

  // Device memory for one bound step's own use (partial sums, sort buffers) where the plan gave
  // the step none (stepScratch in cuda_bind.h takes the plan's first). Bound steps live as long
  // as their executor, which never outlives its backend, so it is freed with the Device.
  StatusOr<void*> scratch(uint64_t bytes);
  // Every byte of device memory this Device allocated for steps beyond the plan: scratch, shared
  // scratch (each size it grew to, as earlier ones stay in use) and a workspace of its own.
  uint64_t stepMemoryBytes() const { return stepMemoryBytes_; }

  // The workspace cuBLAS and cuBLASLt share (kernels::kBlasWorkspaceBytes): the plan's, at the
  // start of its arena (useWorkspace, before any step is bound), or else one the Device
  // allocates when the first step that calls cuBLAS is bound (ensureBlasWorkspace). Set once:
  // left to itself cuBLAS may allocate one when a GEMM first runs on a stream, which a CUDA
  // graph's capture forbids.
  Status useWorkspace(void* memory, uint64_t bytes);
  Status ensureBlasWorkspace();
  void* blasWorkspace() const { return blasWorkspace_; }
  uint64_t blasWorkspaceBytes() const { return blasWorkspaceBytes_; }
  // Device memory that every bound step asking for the same `slot` shares, where the plan gave
  // the step no scratch (0: widened copies of 16-bit operands, 1: collectives' packed blocks on
  // the compute stream, 2: their packed blocks on the comm stream, 3: attention's [T, T] scores
  // on the compute stream, its GEMM path in cuda_attention_table.cc; a step may use 0 and 1). Work
  // on one stream runs one step at a time in order, so a step may use its stream's slot from its
  // first kernel to its last, and nothing it leaves there survives the next step. Reserved at bind
  // time, the pointer kept: a larger request takes a new buffer (at least twice the last), the
  // earlier steps keep the old one.
  static constexpr int kSharedSlots = 4;
  static constexpr int kCommPackingSlot = 2;
  StatusOr<void*> sharedScratch(int slot, uint64_t bytes);
  // A device-visible int a kernel sets to nonzero on data it cannot accept but a bind cannot see
  // (a label outside the classes, a token outside the vocabulary). Raised flags turn into an
  // error with `message` at the next synchronize() (kernels never stop the stream).
  StatusOr<int*> errorFlag(std::string message);
  // Pinned host buffers for host-staged collectives: reserve at bind time, use at run time
  // (bound steps run one at a time, so every step shares them). `which` is 0 or 1.
  Status reserveStaging(int which, uint64_t bytes);
  uint8_t* staging(int which) const { return staging_[which].data; }
  // The collectives' path per mesh group, and the NCCL communicators.
  NcclGroups& collectives() { return *collectives_; }

  // Makes this GPU the calling thread's current one (the runtime API's device is per thread;
  // a no-op when it already is).
  Status activate() const;
  // Joins the comm stream (joinAll), waits for the compute stream; then the first CUDA failure,
  // or the first raised error flag.
  Status synchronize();

  // Collectives beside compute. A collective step bound with an overlap slot runs its NCCL
  // calls on the comm stream: forkComm() makes the comm stream wait for the compute work
  // enqueued so far and returns it, joinLater() records the collective's completion and leaves
  // it pending with its operands' bytes. Every bound step first calls waitFor() with its own
  // operands (CudaBackend::bind wraps them all): the compute stream then waits for each pending
  // collective that touches the same bytes (stream_hazards.h). joinAll() waits for all of them;
  // the end of every function does, and so do synchronize() and the backend's copies, so no
  // collective is pending across functions (a CUDA graph's capture requires that too).
  //
  // A slot (a pair of events, made at bind time and reused by every run) for the collective
  // being bound by `ctx`, or -1 where it must stay on the compute stream: when `ctx` is not the
  // step the backend is binding (a 16-bit collective's widened form: the rounding back follows
  // within the same step, on the compute stream), or DTC_CUDA_OVERLAP=0.
  StatusOr<int> overlapSlot(const StepContext& ctx);
  void setBinding(const StepContext* ctx) { binding_ = ctx; }
  StatusOr<cudaStream_t> forkComm(int slot);
  Status joinLater(int slot);
  Status waitFor(const std::vector<ByteRange>& ranges) {
    return hazards_.empty() ? Status::Ok() : waitForSlow(ranges);
  }
  Status joinAll();

  // Capture in a CUDA graph (cuda_graph.h) needs steps that never wait for the host. A binder
  // whose step will (sends and receives over MPI) says so when it binds; a step that finds it
  // does when it runs (a collective of a host-staged group) says so then. The count only grows.
  void markHostSynchronizing() { ++hostSyncs_; }
  uint64_t hostSyncs() const { return hostSyncs_; }

 private:
  Device() = default;
  struct Pinned {
    uint8_t* data = nullptr;
    uint64_t bytes = 0;
  };
  struct Flag {
    volatile int* host;
    std::string message;
  };
  struct Overlap {
    cudaEvent_t ready = nullptr, done = nullptr;
    std::vector<ByteRange> ranges;
  };
  Status waitForSlow(const std::vector<ByteRange>& ranges);
  Status waitTickets(const std::vector<StreamHazards::Ticket>& tickets);

  int ordinal_ = 0;
  std::string description_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t comm_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* blasWorkspace_ = nullptr;
  uint64_t blasWorkspaceBytes_ = 0;
  bool ownsBlasWorkspace_ = false;
  bool overlap_ = true;
  const StepContext* binding_ = nullptr;
  std::vector<Overlap> overlaps_;
  StreamHazards hazards_;
  uint64_t hostSyncs_ = 0;
  bool tf32_ = false;
  std::vector<void*> scratch_;
  uint64_t stepMemoryBytes_ = 0;
  std::vector<int*> flagPages_;  // mapped pinned pages of kFlagsPerPage ints
  std::vector<Flag> flags_;
  Pinned staging_[2];
  struct Shared {
    void* data = nullptr;
    uint64_t bytes = 0;
  };
  Shared shared_[kSharedSlots];
  std::unique_ptr<NcclGroups> collectives_;
};

// A kernel's CUDA binder (cuda_binders.h).
using CudaBinder = StatusOr<BoundStep> (*)(const StepContext&, Device&);

// A step on 16-bit (bf16/f16) operands run by its float32 binder `wide` on widened copies, the
// results rounded back, as the CPU's bindLowPrecision (cuda_precision_table.cc). Collectives use
// it: exact for moves, sums in f32.
StatusOr<BoundStep> bindWidened(const StepContext& ctx, Device& device, CudaBinder wide);
// all_reduce and reduce_scatter sums and all_gather of 16-bit tensors on NCCL in their own type;
// `widened` (the f32 form on widened copies) where NCCL does not run them
// (cuda_collective_table.cc).
StatusOr<BoundStep> bindHalfAllReduce(const StepContext& ctx, Device& dev, BoundStep widened);
StatusOr<BoundStep> bindHalfReduceScatter(const StepContext& ctx, Device& dev, BoundStep widened);
StatusOr<BoundStep> bindHalfAllGather(const StepContext& ctx, Device& dev, BoundStep widened);

// Validates a step against its kernel's contract (the CPU backend's, the same checks) and binds
// it to CUDA kernels on `device`'s stream. An op the CPU runs but CUDA does not yet is an error
// at bind time, naming the op.
StatusOr<BoundStep> bindCudaStep(const StepContext& ctx, Device& device);

}  // namespace dtc::cuda
