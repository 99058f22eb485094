// The CUDA backend behind dtc::Backend, and the plugin's entry point (dtcCreateBackend).
#include <cstdio>
#include <exception>

#include "cuda_attention_table.h"
#include "cuda_check.h"
#include "cuda_device.h"
#include "cuda_graph.h"
#include "exec/backend.h"
#include "exec/bind_util.h"
#include "exec/precision_contracts.h"
#include "support/printable.h"

namespace dtc::cuda {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::unique_ptr<Device> device)
      : device_(std::move(device)), graphs_(cudaGraphsEnabled()) {}

  std::string name() const override { return "cuda " + device_->description(); }
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
    Status zeroed = cudaStatus(cudaMemsetAsync(p, 0, bytes, device_->stream()), "zero-filling new memory");
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
    DTC_RETURN_IF_ERROR(cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, device_->stream()),
                                   "copying " + std::to_string(bytes) + " bytes to the GPU"));
    // The caller may reuse its buffer at once.
    return device_->synchronize();
  }

  Status download(void* to, const uint8_t* from, uint64_t bytes) override {
    if (bytes == 0) return device_->synchronize();
    DTC_RETURN_IF_ERROR(device_->activate());
    DTC_RETURN_IF_ERROR(device_->joinAll());
    DTC_RETURN_IF_ERROR(cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, device_->stream()),
                                   "copying " + std::to_string(bytes) + " bytes from the GPU"));
    return device_->synchronize();
  }

  Status copy(uint8_t* to, const uint8_t* from, uint64_t bytes) override {
    if (to == from || bytes == 0) return Status::Ok();
    DTC_RETURN_IF_ERROR(device_->activate());
    DTC_RETURN_IF_ERROR(device_->joinAll());
    cudaStream_t s = device_->stream();
    if (to + bytes <= from || from + bytes <= to)
      return cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, s), "copying on the GPU");
    // Overlapping ranges (memmove semantics): through a temporary, stream-ordered. It allocates,
    // which a CUDA graph could not hold, but copies run between functions, never in their steps.
    void* tmp = nullptr;
    DTC_RETURN_IF_ERROR(cudaStatus(cudaMallocAsync(&tmp, bytes, s), "allocating a copy buffer"));
    Status st = cudaStatus(cudaMemcpyAsync(tmp, from, bytes, cudaMemcpyDeviceToDevice, s), "copying on the GPU");
    if (st.ok()) st = cudaStatus(cudaMemcpyAsync(to, tmp, bytes, cudaMemcpyDeviceToDevice, s), "copying on the GPU");
    Status freed = cudaStatus(cudaFreeAsync(tmp, s), "freeing a copy buffer");
    return st.ok() ? freed : st;
  }

  // Every step first makes the compute stream wait for the pending collectives (on the comm
  // stream) that touch its operands' bytes: the host-side check is a scan of a short list.
  // Collectives too: one taking the host-staged path runs on the compute stream.
  StatusOr<BoundStep> bind(const StepContext& step) override {
    DTC_RETURN_IF_ERROR(device_->activate());
    // Collective binders give the comm stream to this step only, not to one they bind inside it.
    device_->setBinding(&step);
    StatusOr<BoundStep> bound = bindCudaStep(step, *device_);
    device_->setBinding(nullptr);
    if (!bound.ok()) return bound;
    Device* device = device_.get();
    std::vector<ByteRange> ranges = operandRanges(step.inputs, step.outputs);
    return BoundStep([device, inner = std::move(bound).value(), ranges = std::move(ranges)]() -> Status {
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

 private:
  std::unique_ptr<Device> device_;
  const bool graphs_;  // DTC_CUDA_GRAPHS
  std::string function_;
  uint64_t hostSyncsAtBegin_ = 0;
};

void writeError(char* error, size_t size, const std::string& message) {
  if (error && size) std::snprintf(error, size, "%s", message.c_str());
}


bool among(const std::string& op, std::initializer_list<const char*> ops) {
  for (const char* o : ops)
    if (op == o) return true;
  return false;
}

}  // namespace

StatusOr<BoundStep> bindCudaStep(const StepContext& ctx, Device& device) {
  const std::string op = ctx.step.op()->str();
  // 16-bit operands (mixed precision), as the CPU's bindCpuStep: contractions take them as they
  // are (cuBLAS, f32 accumulation); collectives run their f32 form on widened copies; casts and
  // the ops that move bytes of any dtype bind as usual; every other op refuses them here, by
  // name, rather than with a dtype mismatch.
  const TensorView* low = nullptr;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (!low && lowPrecision(t.dtype)) low = &t;
  // Attention's kernels take 16-bit q, k, v beside an f32 log-sum-exp and check that themselves;
  // so do the epilogues (16-bit x and weight, f32 bias), the layout ops, which move 16-bit
  // elements as they are, and LayerNorm, which may round its output (dtc-fold-casts).
  if (low && !among(op, {"cast", "reshape", "send", "recv", "causal_attention", "causal_attention_grad", "linear_bias",
                         "linear_bias_gelu", "linear_grad_input_gelu", "transpose", "split", "concat",
                         "layer_norm"})) {
    const bool contraction = among(op, {"matmul", "batch_matmul", "linear", "linear_grad_input", "linear_grad_weight"});
    const bool collective = among(op, {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "local_slice",
                                       "collective_broadcast"});
    if (!contraction && !collective)
      return invalid(ctx, "no CUDA kernel yet for '" + printable(op) + "' on " + dtypeName(low->dtype) + " operands");
    const DType first = ctx.inputs.empty() ? ctx.outputs[0].dtype : ctx.inputs[0].dtype;
    for (const auto* list : {&ctx.inputs, &ctx.outputs})
      for (const TensorView& t : *list)
        if (t.dtype != first)
          return invalid(ctx, "operands must share one element type, got " + dtypeName(first) + " and " +
                                  dtypeName(t.dtype));
    if (collective) return bindWidened(ctx, device, collectiveCudaBinders().at(op));
  }
  for (const CudaBinderTable* table : {&coreCudaBinders(), &lossCudaBinders(), &transformerCudaBinders(),
                                       &collectiveCudaBinders(), &vocabParallelCudaBinders(),
                                       &convCudaBinders(), &precisionCudaBinders(),
                                       &attentionCudaBinders(), &epilogueCudaBinders()}) {
    auto it = table->find(op);
    if (it != table->end()) return it->second(ctx, device);
  }
  // Unknown ops: the CPU backend tells those apart from ops only it runs.
  return invalid(ctx, "no CUDA kernel yet for '" + printable(op) + "'");
}

}  // namespace dtc::cuda

// The plugin's entry point (exec/backend.h): nullptr and a one-line reason when the ABI differs,
// there is no GPU, or the GPU cannot be set up. C linkage and default visibility: the only
// symbol the library exports.
extern "C" __attribute__((visibility("default"))) dtc::Backend* dtcCreateBackend(
    int abiVersion, int localRank, char* error, size_t errorSize) {
  using namespace dtc;
  try {
    if (abiVersion != kBackendAbiVersion) {
      cuda::writeError(error, errorSize,
                       "the CUDA backend plugin speaks backend ABI " + std::to_string(kBackendAbiVersion) +
                           ", dtrun speaks " + std::to_string(abiVersion) + " (rebuild them together)");
      return nullptr;
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      std::string why = e != cudaSuccess ? cudaGetErrorString(e) : "no devices";
      cuda::writeError(error, errorSize, "no CUDA device found (cudaGetDeviceCount: " + why +
                                             "); --device cuda needs a GPU");
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
