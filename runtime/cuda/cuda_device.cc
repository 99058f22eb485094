// The Device: stream, cuBLAS handle, and the resources bound steps keep.
#include "cuda_device.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "cuda_check.h"

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
  DTC_RETURN_IF_ERROR(cublasStatus(cublasSetStream(d->blas_, d->stream_), "binding cuBLAS to the stream"));
  // 16-bit GEMMs: split-K partial sums are reduced in f32, never rounded to the output type on
  // the way, so C is rounded once, as the CPU's widened contractions (and torch with
  // allow_bf16_reduced_precision_reduction off). No effect on f32 GEMMs.
  DTC_RETURN_IF_ERROR(cublasStatus(
      cublasSetMathMode(d->blas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
      "setting cuBLAS's math mode"));
  const char* tf32 = std::getenv("DTC_CUDA_TF32");
  d->tf32_ = tf32 && std::strcmp(tf32, "1") == 0;
  std::array<unsigned char, 16> uuid;
  std::memcpy(uuid.data(), prop.uuid.bytes, uuid.size());
  DTC_ASSIGN_OR_RETURN(d->collectives_, NcclGroups::create(ordinal, uuid));
  return d;
}

Device::~Device() {
  // Errors are ignored: at process exit the CUDA runtime may already be going away.
  if (stream_) (void)cudaStreamSynchronize(stream_);
  collectives_.reset();  // before the stream its communicators' work ran on
  for (void* p : scratch_) (void)cudaFree(p);
  for (Shared& s : shared_)
    if (s.data) (void)cudaFree(s.data);
  for (int* page : flagPages_) (void)cudaFreeHost(page);
  for (Pinned& p : staging_)
    if (p.data) (void)cudaFreeHost(p.data);
  if (blas_) (void)cublasDestroy(blas_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

StatusOr<void*> Device::scratch(uint64_t bytes) {
  void* p = nullptr;
  DTC_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&p, bytes ? bytes : 1),
                                 "allocating " + std::to_string(bytes) + " bytes of scratch memory"));
  scratch_.push_back(p);
  return p;
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
  return p;
}

StatusOr<int*> Device::errorFlag(std::string message) {
  if (flags_.size() % kFlagsPerPage == 0) {
    // Mapped pinned memory: kernels write it directly and the host reads it after a stream
    // synchronisation, with no copy. Pages never move, so flag pointers stay valid.
    void* page = nullptr;
    DTC_RETURN_IF_ERROR(cudaStatus(cudaHostAlloc(&page, kFlagsPerPage * sizeof(int), cudaHostAllocMapped),
                                   "allocating error flags"));
    std::memset(page, 0, kFlagsPerPage * sizeof(int));
    flagPages_.push_back(static_cast<int*>(page));
  }
  int* host = flagPages_.back() + flags_.size() % kFlagsPerPage;
  void* device = nullptr;
  DTC_RETURN_IF_ERROR(cudaStatus(cudaHostGetDevicePointer(&device, host, 0), "mapping an error flag"));
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
  DTC_RETURN_IF_ERROR(cudaStatus(cudaMallocHost(&data, bytes),
                                 "allocating " + std::to_string(bytes) + " bytes of pinned host memory"));
  p = {static_cast<uint8_t*>(data), bytes};
  return Status::Ok();
}

Status Device::activate() const {
  return cudaStatus(cudaSetDevice(ordinal_), "selecting GPU " + std::to_string(ordinal_));
}

Status Device::synchronize() {
  DTC_RETURN_IF_ERROR(cudaStatus(cudaStreamSynchronize(stream_), "running the plan's steps on " + description_));
  for (const Flag& f : flags_)
    if (*f.host) return Status::InvalidInput(f.message);
  return Status::Ok();
}

}  // namespace dtc::cuda
