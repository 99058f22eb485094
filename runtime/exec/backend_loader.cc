// Backends by name; the CUDA one from its plugin, so dtrun needs no GPU library to start.
#include <dlfcn.h>

#include "exec/backend.h"
#include "io/files.h"
#include "support/printable.h"
#include "support/runtime_options.h"

namespace dtc {
namespace {

// libdtc_cuda.so beside the running executable (the build puts it next to dtrun).
std::string pluginPath() {
  if (!runtimeOptions().cudaBackend.empty()) return runtimeOptions().cudaBackend;
  return io::besideExecutable("libdtc_cuda.so");
}

StatusOr<std::unique_ptr<Backend>> loadCuda(int localRank) {
  const std::string path = pluginPath();
  // Kept loaded for the process's life: the backend's code lives in it.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    return Status::InvalidInput("--device cuda: cannot load the CUDA backend " + path + " (" +
                                (why ? why : "unknown error") +
                                "); build dtc on a machine with the CUDA toolkit");
  }
  auto create = reinterpret_cast<CreateBackendFn>(::dlsym(handle, kCreateBackendSymbol));
  if (!create)
    return Status::InvalidInput("--device cuda: " + path + " is not a dtc backend (no " +
                                kCreateBackendSymbol + ")");
  char error[512] = {0};
  Backend* backend = create(kBackendAbiVersion, localRank, error, sizeof error);
  if (!backend) return Status::InvalidInput(std::string("--device cuda: ") + error);
  return std::unique_ptr<Backend>(backend);
}

}  // namespace

const std::vector<BackendFactory>& backendFactories() {
  static const std::vector<BackendFactory> factories = {
      {"cpu", [](int) -> StatusOr<std::unique_ptr<Backend>> { return createCpuBackend(); }},
      {"cuda", loadCuda},
      {"cpu-staged",
       [](int) -> StatusOr<std::unique_ptr<Backend>> { return createStagedCpuBackend(); }},
  };
  return factories;
}

StatusOr<std::unique_ptr<Backend>> createBackend(const std::string& device, int localRank) {
  const std::vector<BackendFactory>& factories = backendFactories();
  if (device.empty()) return factories.front().create(localRank);
  std::vector<std::string> names;
  for (const BackendFactory& f : factories) {
    if (device == f.name) return f.create(localRank);
    names.push_back(f.name);
  }
  return Status::InvalidInput("unknown --device '" + device + "' (expected " + alternatives(names) +
                              ")");
}

}  // namespace dtc
