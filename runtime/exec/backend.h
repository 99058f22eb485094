// Where a plan's memory lives and its steps run. The CPU backend (host memory, the CPU kernel
// table) is built into dtrun; a device backend (CUDA) is a plugin loaded at run time, so the
// same dtrun starts on machines without a GPU or its libraries.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/step.h"
#include "ops/device_kind.h"
#include "support/status.h"

namespace dtc {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // The kind of device it is (ops/device_kind.h): what callers that differ by device ask,
  // rather than its name.
  virtual const DeviceKind& kind() const = 0;
  // Whether kernels work on host memory. If not, the executor keeps host copies of the values
  // the trainer reads and writes (data inputs, loss, outputs, state for init and saving) and
  // moves them with upload/download.
  virtual bool hostMemory() const = 0;
  // Zero-filled memory for a region (state or arena); release() gives it back.
  virtual StatusOr<uint8_t*> allocate(uint64_t bytes) = 0;
  // Memory this backend could still allocate (free GPU memory; the host's available RAM), or 0
  // when it cannot tell: checked against a plan's needs before anything is allocated.
  virtual uint64_t availableBytes() const { return 0; }
  virtual void release(uint8_t* memory, uint64_t bytes) = 0;
  virtual Status upload(uint8_t* to, const void* from, uint64_t bytes) = 0;
  virtual Status download(void* to, const uint8_t* from, uint64_t bytes) = 0;
  virtual Status copy(uint8_t* to, const uint8_t* from, uint64_t bytes) = 0;  // within the backend
  // Downloads `rows` runs of `rowBytes` each, `pitch` bytes apart from `from`, packed at `to`
  // (a column block of a matrix). The default downloads row by row.
  virtual Status downloadRows(void* to, const uint8_t* from, uint64_t rowBytes, uint64_t pitch,
                              uint64_t rows) {
    if (rows <= 1 || pitch == rowBytes) return download(to, from, rows * rowBytes);
    for (uint64_t r = 0; r < rows; ++r)
      DTC_RETURN_IF_ERROR(
          download(static_cast<uint8_t*>(to) + r * rowBytes, from + r * pitch, rowBytes));
    return Status::Ok();
  }
  // Page-locks host memory that downloads fill often (the checkpoint snapshot), so that they go
  // at the link's speed straight into it rather than through the driver's staging buffers;
  // unpinHost() gives it back before it is unmapped. Backends with host memory need neither.
  virtual Status pinHost(void* /*memory*/, uint64_t /*bytes*/) { return Status::Ok(); }
  virtual void unpinHost(void* /*memory*/) {}
  // Validates a step against its kernel's contract and binds it to its operands' storage.
  virtual StatusOr<BoundStep> bind(const StepContext& step) = 0;
  // The executor binds a function's steps between these two calls and runs what endFunction
  // returns: the steps themselves (the default), or a backend's replacement for the whole
  // sequence (the CUDA backend's graph of it). The steps stay valid on their own too: the
  // executor runs them one by one when it times each.
  virtual void beginFunction(const std::string& /*function*/) {}
  virtual std::vector<BoundStep> endFunction(std::vector<BoundStep> steps) { return steps; }
  // Returns once every step started so far has finished (bound steps may run asynchronously).
  virtual Status synchronize() = 0;
  // Bytes of device memory the backend allocated for steps beyond the plan's regions (scratch
  // it keeps itself).
  virtual uint64_t unplannedBytes() const { return 0; }
  // The plan's workspace for the GEMM libraries (Plan.workspace_bytes, the arena's first bytes in
  // every function), given before any step is bound. Backends without one ignore it.
  virtual Status useWorkspace(uint8_t* /*memory*/, uint64_t /*bytes*/) { return Status::Ok(); }
};

// The built-in backend: host memory, the CPU kernels.
std::unique_ptr<Backend> createCpuBackend();
// The CPU kernels behind the device interface: separate memory reached only through
// upload/download, as a GPU's. Tests the device path of the executor and trainer on machines
// without a GPU (dtrun --device cpu-staged).
std::unique_ptr<Backend> createStagedCpuBackend();

// The backends dtrun can run on, by --device name: the built-in ones and the plugins.
struct BackendFactory {
  const char* name;  // "cpu", "cpu-staged", "cuda"
  // Makes one; `localRank` picks the device among this node's. Errors say what is missing.
  StatusOr<std::unique_ptr<Backend>> (*create)(int localRank);
};
const std::vector<BackendFactory>& backendFactories();

// The backend `device` names ("" is the CPU's): "cuda" loads the plugin libdtc_cuda.so next to
// dtrun, or the file named by DTC_CUDA_BACKEND.
StatusOr<std::unique_ptr<Backend>> createBackend(const std::string& device, int localRank);

// The plugin's entry point (C linkage, looked up by name).
constexpr int kBackendAbiVersion = 5;
using CreateBackendFn = Backend* (*)(int abiVersion, int localRank, char* error, size_t errorSize);
constexpr const char kCreateBackendSymbol[] = "dtcCreateBackend";
// The plugin's own copy of the runtime switches, parsed again (reloadRuntimeOptions; for the
// GPU kernel tests, which bind under several settings in one process).
using ReloadOptionsFn = void (*)();
constexpr const char kReloadOptionsSymbol[] = "dtcReloadRuntimeOptions";

}  // namespace dtc
