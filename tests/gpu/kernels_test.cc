// Every op with a CUDA kernel, run on the CUDA backend plugin and on the CPU kernels (the
// reference) with the same random inputs, outputs compared (max |cuda − cpu| / max |cpu| ≤
// 1e-5 for fp32); plus contract parity (both backends refuse a malformed step with the same
// message), data errors raised on the device, and point-to-point transfers.
//
//   kernels_test [--quiet]               one process: collectives over a one-device mesh
//   mpirun -np 2 kernels_test            collectives over two processes (they may share a GPU)
//   [mpirun -np N] kernels_test --nccl   the collectives alone, on NCCL (DTC_COLLECTIVES=nccl);
//                                        skipped unless this node has a GPU per process
//
// Exit status: 0 all passed, 1 a failure, 77 no CUDA device, or too few for --nccl (ctest
// reports "skipped").
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/world.h"
#include "harness.h"
#include "io/files.h"
#include "support/runtime_options.h"

#ifndef DTC_CUDA_PLUGIN_FROM_TEST
#define DTC_CUDA_PLUGIN_FROM_TEST "libdtc_cuda.so"
#endif

namespace dtc::gputest {

// cases.cc
std::vector<Case> kernelCases();
std::vector<Case> collectiveCases(int64_t n);
std::vector<Case> malformedCases();
// multi_tensor_cases.cc
std::vector<Case> multiTensorCases();
std::vector<Case> multiTensorMalformedCases();
// loss_cases.cc
std::vector<Case> lossCases();
std::vector<Case> lossMalformedCases();
// norm_cases.cc
std::vector<Case> normCases();
std::vector<Case> normMalformedCases();
// fp8_cases.cc
std::vector<Case> fp8Cases();
std::vector<Case> fp8MalformedCases();
// moe_cases.cc
std::vector<Case> moeCases();
std::vector<Case> moeMalformedCases();
Case moeCorruptPlan();
// attention_cases.cc
void runAttentionCases(Harness& h);
void runGroupedAttentionCases(Harness& h);
void runContextAttentionCases(Harness& h, int64_t devices, int64_t rank);
// epilogue_cases.cc
void runEpilogueCases(Harness& h);
// packed_attention_cases.cc
void runPackedAttentionCases(Harness& h);
// precision_cases.cc
std::vector<Case> precisionCases();
std::vector<Case> precisionCollectiveCases(int64_t n);
std::vector<Case> precisionMalformedCases();
std::vector<std::pair<Case, std::string>> precisionDeviceRefusals();

namespace {

constexpr int kSkipped = 77;

struct Plugin {
  CreateBackendFn create = nullptr;
  ReloadOptionsFn reloadOptions = nullptr;
  std::string path, error;
};

Plugin loadPlugin() {
  Plugin p;
  const char* env = std::getenv("DTC_CUDA_BACKEND");
  p.path = env && *env ? env : io::besideExecutable(DTC_CUDA_PLUGIN_FROM_TEST);
  void* handle = ::dlopen(p.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    p.error = "cannot load " + p.path + ": " + (why ? why : "unknown error");
    return p;
  }
  p.create = reinterpret_cast<CreateBackendFn>(::dlsym(handle, kCreateBackendSymbol));
  p.reloadOptions = reinterpret_cast<ReloadOptionsFn>(::dlsym(handle, kReloadOptionsSymbol));
  if (!p.create) p.error = p.path + " has no " + kCreateBackendSymbol;
  if (!p.reloadOptions) p.error = p.path + " has no " + kReloadOptionsSymbol;
  if (!p.error.empty()) p.create = nullptr;
  return p;
}

StatusOr<std::unique_ptr<Backend>> createDevice(const Plugin& p, int localRank) {
  char error[512] = {0};
  Backend* b = p.create(kBackendAbiVersion, localRank, error, sizeof error);
  if (!b) return Status::InvalidInput(error);
  return std::unique_ptr<Backend>(b);
}

// GPUs visible to this process, from the driver (libcuda.so.1, as the plugin's runtime sees
// them); 0 without a driver.
int gpuCount() {
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) return 0;
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  auto init = reinterpret_cast<Init>(::dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<Count>(::dlsym(driver, "cuDeviceGetCount"));
  int n = 0;
  return init && count && init(0) == 0 && count(&n) == 0 ? n : 0;
}

// Device-side data errors, each on a fresh backend (raised flags stay raised).
int runErrorChecks(const Plugin& plugin, int localRank, comm::DeviceMesh* mesh, int rank,
                   bool verbose) {
  struct Check {
    Case c;
    const char* text;
  };
  const std::vector<Check> checks = {
      {{"bad label", "softmax_cross_entropy", {}, {f32({4, 10}), ids({4}, 11, 10)}, {out({})}},
       "bad label: a label is outside [0, 10)"},
      {{"bad token id", "embedding", {}, {f32({8, 3}), ids({5}, 0, -3)}, {out({5, 3})}},
       "bad token id: a token id is outside [0, 8)"},
      {{"bad token id in grad",
        "embedding_grad",
        {},
        {f32({5, 3}), ids({5}, 100, 9)},
        {out({8, 3})}},
       "a token id is outside [0, 8)"},
      {{"bad label, split classes",
        "cross_entropy_parts",
        {},
        {f32({4, 6}), ids({4}, 7, 6), f32({4})},
        {out({4}), out({4})}},
       "a label is outside [0, 6)"},
      {moeCorruptPlan(),
       "bad routing plan: a routing plan names an expert outside [0, 4) or a slot outside [-1, 2)"},
  };
  int failures = 0;
  for (const Check& check : checks) {
    StatusOr<std::unique_ptr<Backend>> device = createDevice(plugin, localRank);
    if (!device.ok()) {
      std::printf("FAIL %s: %s\n", check.c.label.c_str(), device.status().message().c_str());
      ++failures;
      continue;
    }
    Harness h(**device, mesh, rank, verbose);
    h.expectRunError(check.c, check.text);
    failures += h.failures();
  }
  return failures;
}

}  // namespace
}  // namespace dtc::gputest

int main(int argc, char** argv) {
  using namespace dtc;
  using namespace dtc::gputest;
  bool verbose = true, nccl = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quiet") == 0) verbose = false;
    if (std::strcmp(argv[i], "--nccl") == 0) nccl = true;
  }

  StatusOr<comm::World> world = comm::detectWorld();
  if (!world.ok()) {
    std::fprintf(stderr, "kernels_test: %s\n", world.status().message().c_str());
    return 1;
  }
  if (nccl) {
    // NCCL refuses two ranks on one GPU; the processes are taken to share one node.
    const int gpus = gpuCount();
    if (gpus < world->size) {
      if (world->rank == 0)
        std::printf(
            "collectives on NCCL: skipped (%d GPU(s) for %d process(es); NCCL needs a GPU per "
            "process)\n",
            gpus, world->size);
      return kSkipped;
    }
    // The plugin reads it when the backend is created; without NCCL it says so on stderr and
    // stays host-staged (ctest and run.sh fail on that line).
    ::setenv("DTC_COLLECTIVES", "nccl", 1);
  }
  Plugin plugin = loadPlugin();
  if (!plugin.create) {
    std::fprintf(stderr, "kernels_test: %s\n", plugin.error.c_str());
    return 1;
  }
  setRuntimeOptionsReload([reload = plugin.reloadOptions] {
    reloadRuntimeOptions();
    reload();
  });
  {
    char error[512] = {0};
    if (plugin.create(kBackendAbiVersion + 1000, 0, error, sizeof error) ||
        !std::strstr(error, "ABI")) {
      std::fprintf(stderr, "FAIL the plugin accepted a wrong ABI version (or said nothing: '%s')\n",
                   error);
      return 1;
    }
  }
  StatusOr<std::unique_ptr<Backend>> device = createDevice(plugin, world->localRank);
  if (!device.ok()) {
    const std::string why = device.status().message();
    if (why.rfind("no CUDA device", 0) == 0) {
      std::printf("no CUDA device: skipped (%s)\n", why.c_str());
      return kSkipped;
    }
    std::fprintf(stderr, "kernels_test: %s\n", why.c_str());
    return 1;
  }
  if (world->rank == 0) std::printf("device: %s\n", (*device)->name().c_str());

  // Collectives run over a one-axis mesh of every process (one process: its trivial group).
  std::unique_ptr<comm::Communicator> communicator;
  if (world->size > 1) {
    auto mpi = comm::createMpiWorld();
    if (!mpi.ok()) {
      std::fprintf(stderr, "kernels_test: %s\n", mpi.status().message().c_str());
      return 1;
    }
    communicator = std::move(mpi).value();
  } else {
    communicator = comm::createSingleProcess();
  }
  auto mesh = comm::DeviceMesh::create(std::move(communicator), {"x"}, {world->size});
  if (!mesh.ok()) {
    std::fprintf(stderr, "kernels_test: %s\n", mesh.status().message().c_str());
    return 1;
  }

  Harness h(**device, mesh->get(), world->rank, verbose && world->rank == 0);
  if (!nccl) {
    for (const Case& c : kernelCases()) h.run(c);
    for (const Case& c : multiTensorCases()) h.run(c);
    for (const Case& c : lossCases()) h.run(c);
    for (const Case& c : normCases()) h.run(c);
    for (const Case& c : moeCases()) h.run(c);
    runAttentionCases(h);
    runGroupedAttentionCases(h);
    runContextAttentionCases(h, world->size, world->rank);
    runPackedAttentionCases(h);
    runEpilogueCases(h);
    for (const Case& c : precisionCases()) h.run(c);
    for (const Case& c : fp8Cases()) h.run(c);
  }
  for (const Case& c : collectiveCases(world->size)) h.run(c);
  for (const Case& c : precisionCollectiveCases(world->size)) h.run(c);
  h.sendRecv({3, 37}, DType::kF32);
  h.sendRecv({5}, DType::kI64);
  h.sendRecv({5, 7}, DType::kBF16);
  if (!nccl) {
    for (const Case& c : malformedCases()) h.expectSameBindError(c);
    for (const Case& c : multiTensorMalformedCases()) h.expectSameBindError(c);
    for (const Case& c : lossMalformedCases()) h.expectSameBindError(c);
    for (const Case& c : normMalformedCases()) h.expectSameBindError(c);
    for (const Case& c : moeMalformedCases()) h.expectSameBindError(c);
    for (const Case& c : precisionMalformedCases()) h.expectSameBindError(c);
    for (const Case& c : fp8MalformedCases()) h.expectSameBindError(c);
    for (const auto& [c, text] : precisionDeviceRefusals()) h.expectBindError(c, text);
    h.expectBindError(
        {"bf16 relu", "relu", {}, {lowp(DType::kBF16, {4, 8})}, {outAs(DType::kBF16, {4, 8})}},
        "relu at bf16 relu: no CUDA kernel yet for 'relu' on bfloat16 operands");
    h.expectBindError({"unknown op", "frobnicate", {}, {f32({2})}, {out({2})}},
                      "unknown kernel (the plan needs a newer dtrun)");
  }
  int failures = h.failures();
  if (!nccl)
    failures += runErrorChecks(plugin, world->localRank, mesh->get(), world->rank,
                               verbose && world->rank == 0);
  const std::string who = world->size > 1 ? "[rank " + std::to_string(world->rank) + "] " : "";
  std::printf("%s%s: %d failure(s)\n", who.c_str(), failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
