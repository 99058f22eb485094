// The Device: stream, cuBLAS handle, and the resources bound steps keep.
#include "cuda_device.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "cuda_check.h"
#include "ops/cuda_scratch.h"
#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

constexpr int kFlagsPerPage = 1024;

}  // namespace

StatusOr<std::unique_ptr<Device>> Device::create(int ordinal) {
  std::unique_ptr<Device> d(new Device());
  d->ordinal_ = ordinal;
  const std::string gpu = "GPU " + std::to_string(ordinal);
  DTC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(ordinal), "selecting " + gpu));
  cudaDeviceProp prop;
  DTC_RETURN_IF_ERROR(cudaStatus(cudaGetDeviceProperties(&prop, ordinal), "querying " + gpu));
  d->description_ = gpu + " (" + prop.name + ", sm_" + std::to_string(prop.major) +
                    std::to_string(prop.minor) + ")";
  DTC_RETURN_IF_ERROR(cudaStatus(cudaStreamCreateWithFlags(&d->stream_, cudaStreamNonBlocking),
                                 "creating a stream on " + gpu));
  DTC_RETURN_IF_ERROR(cublasStatus(cublasCreate(&d->blas_), "creating a cuBLAS handle on " + gpu));
  DTC_RETURN_IF_ERROR(
      cublasStatus(cublasSetStream(d->blas_, d->stream_), "binding cuBLAS to the stream"));
  // The workspace comes later (useWorkspace, ensureBlasWorkspace): cublasSetStream, above,
  // would reset it to cuBLAS's own.
  // The comm stream at the highest priority: NCCL's kernels use few SMs, and the backward
  // kernels queued beside them would otherwise hold the GPU until they are done.
  int leastPriority = 0, greatestPriority = 0;
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority),
                 "querying stream priorities on " + gpu));
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaStreamCreateWithPriority(&d->comm_, cudaStreamNonBlocking, greatestPriority),
                 "creating the collectives' stream on " + gpu));
  d->overlap_ = runtimeOptions().cudaOverlap;
  // 16-bit GEMMs: split-K partial sums are reduced in f32, never rounded to the output type on
  // the way, so C is rounded once, as the CPU's widened contractions (and torch with
  // allow_bf16_reduced_precision_reduction off). No effect on f32 GEMMs.
  DTC_RETURN_IF_ERROR(cublasStatus(
      cublasSetMathMode(
          d->blas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
      "setting cuBLAS's math mode"));
  d->tf32_ = runtimeOptions().cudaTf32;
  std::array<unsigned char, 16> uuid;
  std::memcpy(uuid.data(), prop.uuid.bytes, uuid.size());
  DTC_ASSIGN_OR_RETURN(d->collectives_, NcclGroups::create(ordinal, uuid));
  return d;
}

Device::~Device() {
  // Errors are ignored: at process exit the CUDA runtime may already be going away.
  if (stream_) (void)cudaStreamSynchronize(stream_);
  if (comm_) (void)cudaStreamSynchronize(comm_);
  collectives_.reset();  // before the streams their communicators' work ran on
  for (void* p : scratch_) (void)cudaFree(p);
  for (Shared& s : shared_)
    if (s.data) (void)cudaFree(s.data);
  for (int* page : flagPages_) (void)cudaFreeHost(page);
  for (Pinned& p : staging_)
    if (p.data) (void)cudaFreeHost(p.data);
  for (Overlap& o : overlaps_)
    for (cudaEvent_t e : {o.ready, o.done})
      if (e) (void)cudaEventDestroy(e);
  if (blas_) (void)cublasDestroy(blas_);
  if (ownsBlasWorkspace_) (void)cudaFree(blasWorkspace_);  // after the handle that used it
  if (comm_) (void)cudaStreamDestroy(comm_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

StatusOr<void*> Device::scratch(uint64_t bytes) {
  void* p = nullptr;
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaMalloc(&p, bytes ? bytes : 1),
                 "allocating " + std::to_string(bytes) + " bytes of scratch memory"));
  scratch_.push_back(p);
  stepMemoryBytes_ += bytes ? bytes : 1;
  return p;
}

Status Device::useWorkspace(void* memory, uint64_t bytes) {
  if (blasWorkspace_)
    return Status::Internal("the GEMM workspace was set before the plan's was given");
  if (bytes < kernels::kBlasWorkspaceBytes)
    return Status::InvalidInput("the plan's GEMM workspace is " + std::to_string(bytes) +
                                " bytes; the CUDA backend needs " +
                                std::to_string(kernels::kBlasWorkspaceBytes));
  DTC_RETURN_IF_ERROR(
      cublasStatus(cublasSetWorkspace(blas_, memory, bytes), "setting cuBLAS's workspace"));
  blasWorkspace_ = memory;
  blasWorkspaceBytes_ = bytes;
  return Status::Ok();
}

Status Device::ensureBlasWorkspace() {
  if (blasWorkspace_) return Status::Ok();
  void* p = nullptr;
  DTC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&p, kernels::kBlasWorkspaceBytes),
                                 "allocating cuBLAS's workspace on " + description_));
  Status set = cublasStatus(cublasSetWorkspace(blas_, p, kernels::kBlasWorkspaceBytes),
                            "setting cuBLAS's workspace");
  if (!set.ok()) {
    (void)cudaFree(p);
    return set;
  }
  blasWorkspace_ = p;
  blasWorkspaceBytes_ = kernels::kBlasWorkspaceBytes;
  ownsBlasWorkspace_ = true;
  stepMemoryBytes_ += kernels::kBlasWorkspaceBytes;
  return Status::Ok();
}

StatusOr<void*> Device::sharedScratch(int slot, uint64_t bytes) {
  Shared& s = shared_[slot];
  if (s.data && bytes <= s.bytes) return s.data;
  const uint64_t size = std::max<uint64_t>({bytes, 2 * s.bytes, 1});
  void* p = nullptr;
  DTC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&p, size), "allocating " + std::to_string(size) +
                                                           " bytes of shared scratch memory"));
  if (s.data) scratch_.push_back(s.data);  // steps bound earlier still use it
  s = {p, size};
  stepMemoryBytes_ += size;
  return p;
}

StatusOr<int*> Device::errorFlag(std::string message) {
  if (flags_.size() % kFlagsPerPage == 0) {
    // Mapped pinned memory: kernels write it directly and the host reads it after a stream
    // synchronisation, with no copy. Pages never move, so flag pointers stay valid.
    void* page = nullptr;
    DTC_RETURN_IF_ERROR(
        cudaStatus(cudaHostAlloc(&page, kFlagsPerPage * sizeof(int), cudaHostAllocMapped),
                   "allocating error flags"));
    std::memset(page, 0, kFlagsPerPage * sizeof(int));
    flagPages_.push_back(static_cast<int*>(page));
  }
  int* host = flagPages_.back() + flags_.size() % kFlagsPerPage;
  void* device = nullptr;
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaHostGetDevicePointer(&device, host, 0), "mapping an error flag"));
  flags_.push_back({host, std::move(message)});
  return static_cast<int*>(device);
}

Status Device::reserveStaging(int which, uint64_t bytes) {
  Pinned& p = staging_[which];
  if (bytes <= p.bytes) return Status::Ok();
  // Bound steps only read the pointer when they run; nothing may still be copying from it.
  DTC_RETURN_IF_ERROR(cudaStatus(cudaStreamSynchronize(stream_), "waiting for the stream"));
  if (p.data) (void)cudaFreeHost(p.data);
  p = {};
  void* data = nullptr;
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaMallocHost(&data, bytes),
                 "allocating " + std::to_string(bytes) + " bytes of pinned host memory"));
  p = {static_cast<uint8_t*>(data), bytes};
  return Status::Ok();
}

Status Device::activate() const {
  return cudaStatus(cudaSetDevice(ordinal_), "selecting GPU " + std::to_string(ordinal_));
}

Status Device::synchronize() {
  DTC_RETURN_IF_ERROR(joinAll());
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaStreamSynchronize(stream_), "running the plan's steps on " + description_));
  for (const Flag& f : flags_)
    if (*f.host) return Status::InvalidInput(f.message);
  return Status::Ok();
}

StatusOr<int> Device::overlapSlot(const StepContext& ctx) {
  if (!overlap_ || &ctx != binding_) return -1;
  Overlap o;
  o.ranges = stepRanges(ctx);
  // Timing off: the events only order streams.
  for (cudaEvent_t* e : {&o.ready, &o.done}) {
    Status made = cudaStatus(cudaEventCreateWithFlags(e, cudaEventDisableTiming),
                             ctx.where() + "creating an event");
    if (!made.ok()) {
      if (o.ready) (void)cudaEventDestroy(o.ready);
      return made;
    }
  }
  overlaps_.push_back(std::move(o));
  return static_cast<int>(overlaps_.size() - 1);
}

StatusOr<cudaStream_t> Device::forkComm(int slot) {
  const Overlap& o = overlaps_[slot];
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaEventRecord(o.ready, stream_), "marking the compute stream for a collective"));
  DTC_RETURN_IF_ERROR(
      cudaStatus(cudaStreamWaitEvent(comm_, o.ready, 0), "ordering a collective after its inputs"));
  return comm_;
}

Status Device::joinLater(int slot) {
  const Overlap& o = overlaps_[slot];
  // Pending even if the record fails: a join then waits on the event's last record, harmless.
  hazards_.add(o.ranges, static_cast<StreamHazards::Ticket>(slot));
  return cudaStatus(cudaEventRecord(o.done, comm_), "marking a collective's completion");
}

Status Device::waitTickets(const std::vector<StreamHazards::Ticket>& tickets) {
  Status first = Status::Ok();
  // Every wait is attempted, so none stays pending after a failure.
  for (StreamHazards::Ticket t : tickets) {
    Status waited =
        cudaStatus(cudaStreamWaitEvent(stream_, overlaps_[t].done, 0), "waiting for a collective");
    if (first.ok()) first = waited;
  }
  return first;
}

Status Device::waitForSlow(const std::vector<ByteRange>& ranges) {
  return waitTickets(hazards_.mustWait(ranges));
}

Status Device::joinAll() { return hazards_.empty() ? Status::Ok() : waitTickets(hazards_.drain()); }

}  // namespace dtc::cuda
