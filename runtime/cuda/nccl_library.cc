#include "nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

// Resolves every entry point, or names the first one missing (an NCCL older than 2.7 has no
// send/recv). ncclGetLastError (2.13) is optional: only error messages use it.
bool resolve(void* handle, NcclApi& api, std::string& missing) {
  auto get = [&](auto& fn, const char* name) {
    if (!missing.empty()) return;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
    if (!fn) missing = name;
  };
  get(api.getVersion, "ncclGetVersion");
  get(api.getUniqueId, "ncclGetUniqueId");
  get(api.commInitRank, "ncclCommInitRank");
  get(api.commAbort, "ncclCommAbort");
  get(api.getErrorString, "ncclGetErrorString");
  get(api.allReduce, "ncclAllReduce");
  get(api.allGather, "ncclAllGather");
  get(api.reduceScatter, "ncclReduceScatter");
  get(api.broadcast, "ncclBroadcast");
  get(api.send, "ncclSend");
  get(api.recv, "ncclRecv");
  get(api.groupStart, "ncclGroupStart");
  get(api.groupEnd, "ncclGroupEnd");
  if (!missing.empty()) return false;
  api.getLastError =
      reinterpret_cast<decltype(api.getLastError)>(::dlsym(handle, "ncclGetLastError"));
  return true;
}

StatusOr<NcclApi> open() {
  std::vector<std::string> candidates;
  if (!runtimeOptions().ncclLibrary.empty()) candidates.push_back(runtimeOptions().ncclLibrary);
  candidates.push_back("libnccl.so.2");
#ifdef DTC_NCCL_LIBRARY_HINT
  candidates.push_back(
      DTC_NCCL_LIBRARY_HINT);  // where the build found it (may be off the loader's path)
#endif
  std::string tried;
  for (const std::string& path : candidates) {
    // RTLD_LOCAL: NCCL's symbols stay out of the global namespace (dtrun's MPI has none of them
    // anyway). Never closed: communicators and their proxy threads live in it.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(why ? why : path + ": cannot be loaded");
      continue;
    }
    NcclApi api{};
    std::string missing;
    if (!resolve(handle, api, missing)) {
      tried += (tried.empty() ? "" : "; ") + path + " has no " + missing +
               " (NCCL 2.7 or newer is needed)";
      continue;
    }
    int code = 0;
    if (api.getVersion(&code) != ncclSuccess) code = 0;
    // Since 2.9 the code is major·10000 + minor·100 + patch; before, major·1000 + minor·100 +
    // patch.
    const int major = code >= 10000 ? code / 10000 : code / 1000;
    const int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
    api.path = path;
    api.version =
        std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
    return api;
  }
  return Status::InvalidInput("NCCL cannot be loaded (" + tried + ")");
}

}  // namespace

StatusOr<const NcclApi*> loadNccl() {
  // Loaded once (thread-safe static initialisation); a failure is remembered too.
  static const StatusOr<NcclApi> loaded = open();
  if (!loaded.ok()) return loaded.status();
  return &loaded.value();
}

Status ncclStatus(const NcclApi& api, ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status::Ok();
  std::string message = what + " failed: " + api.getErrorString(result);
  const char* last = api.getLastError ? api.getLastError(nullptr) : nullptr;
  if (last && *last) message += std::string(" (") + last + ")";
  return Status::Internal(message);
}

}  // namespace dtc::cuda
