// The CUDA backend behind dtc::Backend, and the plugin's entry point (dtcCreateBackend).
#include <cstdio>
#include <exception>

#include "cuda_binders.h"
#include "cuda_check.h"
#include "cuda_device.h"
#include "cuda_graph.h"
#include "exec/backend.h"
#include "exec/bind_util.h"
#include "exec/precision_contracts.h"
#include "ops/kernel_registry.h"
#include "ops/step_scratch.h"
#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::unique_ptr<Device> device)
      : device_(std::move(device)), graphs_(cudaGraphsEnabled()) {}

  std::string name() const override { return "cuda " + device_->description(); }
  const DeviceKind& kind() const override { return *findDeviceKind("cuda"); }
  uint64_t unplannedBytes() const override { return device_->stepMemoryBytes(); }
  bool hostMemory() const override { return false; }

  uint64_t availableBytes() const override {
    size_t free = 0, total = 0;
    if (!device_->activate().ok() || cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return free;
  }

  StatusOr<uint8_t*> allocate(uint64_t bytes) override {
    DTC_RETURN_IF_ERROR(device_->activate());
    void* p = nullptr;
    // At least one byte: a region of 0 bytes still gets a distinct, valid address.
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
      size_t free = 0, total = 0;
      (void)cudaGetLastError();
      (void)cudaMemGetInfo(&free, &total);
      return cudaStatus(e, "allocating " + std::to_string(bytes) + " bytes on " +
                               device_->description() + " (" + std::to_string(free) +
                               " bytes free of " + std::to_string(total) + ")");
    }
    Status zeroed =
        cudaStatus(cudaMemsetAsync(p, 0, bytes, device_->stream()), "zero-filling new memory");
    if (zeroed.ok()) zeroed = device_->synchronize();
    if (!zeroed.ok()) {
      (void)cudaFree(p);
      return zeroed;
    }
    return static_cast<uint8_t*>(p);
  }

  void release(uint8_t* memory, uint64_t) override {
    if (memory) (void)cudaFree(memory);  // waits for the work still using it
  }

  // Memory moved outside the steps waits for the collectives still running beside them.
  Status upload(uint8_t* to, const void* from, uint64_t bytes) override {
    if (bytes == 0) return Status::Ok();
    DTC_RETURN_IF_ERROR(device_->activate());
    DTC_RETURN_IF_ERROR(device_->joinAll());
    DTC_RETURN_IF_ERROR(
        cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, device_->stream()),
                   "copying " + std::to_string(bytes) + " bytes to the GPU"));
    // The caller may reuse its buffer at once.
    return device_->synchronize();
  }

  Status download(void* to, const uint8_t* from, uint64_t bytes) override {
    if (bytes == 0) return device_->synchronize();
    DTC_RETURN_IF_ERROR(device_->activate());
    DTC_RETURN_IF_ERROR(device_->joinAll());
    DTC_RETURN_IF_ERROR(
        cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, device_->stream()),
                   "copying " + std::to_string(bytes) + " bytes from the GPU"));
    return device_->synchronize();
  }

  // One strided copy: the link moves only the rows' bytes.
  Status downloadRows(void* to, const uint8_t* from, uint64_t rowBytes, uint64_t pitch,
                      uint64_t rows) override {
    if (rows <= 1 || pitch == rowBytes) return download(to, from, rows * rowBytes);
    DTC_RETURN_IF_ERROR(device_->activate());
    DTC_RETURN_IF_ERROR(device_->joinAll());
    DTC_RETURN_IF_ERROR(cudaStatus(cudaMemcpy2DAsync(to, rowBytes, from, pitch, rowBytes, rows,
                                                     cudaMemcpyDeviceToHost, device_->stream()),
                                   "copying " + std::to_string(rows) + " rows of " +
                                       std::to_string(rowBytes) + " bytes from the GPU"));
    return device_->synchronize();
  }

  Status pinHost(void* memory, uint64_t bytes) override {
    DTC_RETURN_IF_ERROR(device_->activate());
    return cudaStatus(cudaHostRegister(memory, bytes, cudaHostRegisterDefault),
                      "page-locking " + std::to_string(bytes) + " bytes of host memory");
  }

  void unpinHost(void* memory) override {
    if (device_->activate().ok()) (void)cudaHostUnregister(memory);
  }

  Status copy(uint8_t* to, const uint8_t* from, uint64_t bytes) override {
    if (to == from || bytes == 0) return Status::Ok();
    DTC_RETURN_IF_ERROR(device_->activate());
    DTC_RETURN_IF_ERROR(device_->joinAll());
    cudaStream_t s = device_->stream();
    if (to + bytes <= from || from + bytes <= to)
      return cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, s),
                        "copying on the GPU");
    // Overlapping ranges (memmove semantics): through a temporary, stream-ordered. It allocates,
    // which a CUDA graph could not hold, but copies run between functions, never in their steps.
    void* tmp = nullptr;
    DTC_RETURN_IF_ERROR(cudaStatus(cudaMallocAsync(&tmp, bytes, s), "allocating a copy buffer"));
    Status st = cudaStatus(cudaMemcpyAsync(tmp, from, bytes, cudaMemcpyDeviceToDevice, s),
                           "copying on the GPU");
    if (st.ok())
      st = cudaStatus(cudaMemcpyAsync(to, tmp, bytes, cudaMemcpyDeviceToDevice, s),
                      "copying on the GPU");
    Status freed = cudaStatus(cudaFreeAsync(tmp, s), "freeing a copy buffer");
    return st.ok() ? freed : st;
  }

  // Every step first makes the compute stream wait for the pending collectives (on the comm
  // stream) that touch its operands' or scratch's bytes: the host-side check is a scan of a short
  // list. Collectives too: one taking the host-staged path runs on the compute stream.
  StatusOr<BoundStep> bind(const StepContext& step) override {
    DTC_RETURN_IF_ERROR(device_->activate());
    // Collective binders give the comm stream to this step only, not to one they bind inside it.
    device_->setBinding(&step);
    StatusOr<BoundStep> bound = bindCudaStep(step, *device_);
    device_->setBinding(nullptr);
    if (!bound.ok()) return bound;
    Device* device = device_.get();
    std::vector<ByteRange> ranges = stepRanges(step);
    return BoundStep(
        [device, inner = std::move(bound).value(), ranges = std::move(ranges)]() -> Status {
          DTC_RETURN_IF_ERROR(device->waitFor(ranges));
          return inner();
        });
  }

  void beginFunction(const std::string& function) override {
    function_ = function;
    hostSyncsAtBegin_ = device_->hostSyncs();
  }

  // The steps, ending with the compute stream's join of the collectives still pending; as one
  // CUDA graph (cuda_graph.h) unless a step binder said its step waits for the host.
  std::vector<BoundStep> endFunction(std::vector<BoundStep> steps) override {
    if (steps.empty()) return steps;
    Device* device = device_.get();
    steps.push_back([device] { return device->joinAll(); });
    if (!graphs_ || device_->hostSyncs() != hostSyncsAtBegin_) return steps;
    std::vector<BoundStep> one;
    one.push_back(capturedSteps(*device_, std::move(steps), function_));
    return one;
  }

  Status synchronize() override { return device_->synchronize(); }

  Status useWorkspace(uint8_t* memory, uint64_t bytes) override {
    DTC_RETURN_IF_ERROR(device_->activate());
    return device_->useWorkspace(memory, bytes);
  }

 private:
  std::unique_ptr<Device> device_;
  const bool graphs_;  // DTC_CUDA_GRAPHS
  std::string function_;
  uint64_t hostSyncsAtBegin_ = 0;
};

void writeError(char* error, size_t size, const std::string& message) {
  if (error && size) std::snprintf(error, size, "%s", message.c_str());
}

}  // namespace

StatusOr<BoundStep> bindCudaStep(const StepContext& ctx, Device& device) {
  DTC_ASSIGN_OR_RETURN(const KernelInfo* kernel, ctx.kernel());
  const CudaBinder bind = cudaBinders()[static_cast<uint16_t>(kernel->kernel)];
  // The plan's GEMM workspace when it gave one (CudaBackend::useWorkspace), else the Device's.
  if (usesBlasWorkspace(*kernel)) DTC_RETURN_IF_ERROR(device.ensureBlasWorkspace());
  // 16-bit operands (mixed precision), by the registry's element types: a kernel of any type binds
  // as usual; one that takes 16-bit operands runs them natively (cuBLAS and the 16-bit kernels
  // accumulate in f32), except collectives, which run their f32 form on widened copies (exact
  // for moves, sums in f32) but for the sums and gathers NCCL runs in the 16-bit type itself; a
  // float32 kernel refuses them here, by name.
  const TensorView* low = firstLowPrecision(ctx);
  if (!low || kernel->types == KernelTypes::kAny) return bind(ctx, device);
  if (kernel->types == KernelTypes::kF32)
    return invalid(ctx, std::string("no CUDA kernel yet for '") + kernel->name + "' on " +
                            dtypeName(low->dtype) + " operands");
  if (kernel->family != KernelFamily::kCollective) return bind(ctx, device);
  const DType first = ctx.inputs.empty() ? ctx.outputs[0].dtype : ctx.inputs[0].dtype;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (t.dtype != first)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(first) +
                                " and " + dtypeName(t.dtype));
  DTC_ASSIGN_OR_RETURN(BoundStep widened, bindWidened(ctx, device, bind));
  switch (kernel->kernel) {
    case Kernel::all_reduce: return bindHalfAllReduce(ctx, device, std::move(widened));
    case Kernel::reduce_scatter: return bindHalfReduceScatter(ctx, device, std::move(widened));
    case Kernel::all_gather: return bindHalfAllGather(ctx, device, std::move(widened));
    default: return widened;
  }
}

}  // namespace dtc::cuda

// The switches of the plugin's copy of support/runtime_options, parsed again (exec/backend.h).
extern "C" __attribute__((visibility("default"))) void dtcReloadRuntimeOptions() {
  dtc::reloadRuntimeOptions();
}

// The plugin's entry point (exec/backend.h): nullptr and a one-line reason when the ABI differs,
// there is no GPU, or the GPU cannot be set up. C linkage and default visibility, as the
// switches' reload above: the only symbols the library exports.
extern "C" __attribute__((visibility("default"))) dtc::Backend* dtcCreateBackend(int abiVersion,
                                                                                 int localRank,
                                                                                 char* error,
                                                                                 size_t errorSize) {
  using namespace dtc;
  try {
    if (abiVersion != kBackendAbiVersion) {
      cuda::writeError(error, errorSize,
                       "the CUDA backend plugin speaks backend ABI " +
                           std::to_string(kBackendAbiVersion) + ", dtrun speaks " +
                           std::to_string(abiVersion) + " (rebuild them together)");
      return nullptr;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      std::string why = e != cudaSuccess ? cudaGetErrorString(e) : "no devices";
      cuda::writeError(
          error, errorSize,
          "no CUDA device found (cudaGetDeviceCount: " + why + "); --device cuda needs a GPU");
      return nullptr;
    }
    const int ordinal = ((localRank % count) + count) % count;
    StatusOr<std::unique_ptr<cuda::Device>> device = cuda::Device::create(ordinal);
    if (!device.ok()) {
      cuda::writeError(error, errorSize, device.status().message());
      return nullptr;
    }
    return new cuda::CudaBackend(std::move(device).value());
  } catch (const std::exception& ex) {
    // No exception may cross the C boundary.
    cuda::writeError(error, errorSize, std::string("initialising the CUDA backend: ") + ex.what());
    return nullptr;
  }
}
