#include "support/runtime_options.h"

#include <cstdlib>

namespace dtc {
namespace {

struct Switch {
  const char* name;
  const char* values;
  const char* help;
};

// The one list of switches (runtime_options.h explains each); the help and the test that the
// docs name every switch read it.
constexpr Switch kSwitches[] = {
    {"DTC_CUDA_BACKEND", "PATH", "the CUDA plugin (default: libdtc_cuda.so beside dtrun)"},
    {"DTC_NCCL_LIBRARY", "PATH", "the NCCL library (default: libnccl.so.2 on the library path)"},
    {"DTC_COLLECTIVES", "mpi|nccl",
     "CUDA collectives (default: NCCL where every rank has its own GPU)"},
    {"DTC_CUDA_ATTENTION", "auto|cudnn|flash|gemm",
     "causal attention's CUDA path: cuDNN's fused kernels for attention on the fused "
     "projection where cuDNN loads, else dtc's GEMM path (16-bit) or flash kernels (default "
     "auto)"},
    {"DTC_CUDNN_LIBRARY", "PATH", "the cuDNN library (default: libcudnn.so.9 on the library path)"},
    {"DTC_CUDNN_DETERMINISTIC", "0|1",
     "cuDNN attention's deterministic backward (default 0: its faster one, whose sums' order "
     "varies)"},
    {"DTC_CUDA_GRAPHS", "0|1", "replay each function as a CUDA graph (default 1)"},
    {"DTC_CUDA_OVERLAP", "0|1",
     "collectives on their own stream, overlapping backward (default 1)"},
    {"DTC_CUDA_TF32", "0|1", "allow TF32 for f32 GEMMs (default 0)"},
    {"DTC_CUDA_LT_EPILOGUES", "0|1", "fused linear epilogues through cuBLASLt (default 1)"},
    {"DTC_WATCHDOG_LIVENESS", "0|1",
     "every half second, each rank looks at its host's other ranks and tells every rank of one "
     "that died (default 1; 0: a rank that dies on another host is found at the timeout)"},
    {"DTC_SNAPSHOT_COPY", "background|step",
     "who copies a --checkpoint-async snapshot out of host memory: the writer thread beside the "
     "next step (default), or every training thread in the step"},
    {"DTC_FAULT", "POINT[@RANK][#N][:throw|:pause]",
     "tests: SIGKILL (an exception; a second's pause) at the N-th arrival at a fault point"},
};

Status malformed(const char* name, const std::string& value) {
  for (const Switch& s : kSwitches)
    if (std::string(s.name) == name)
      return Status::InvalidInput(std::string(name) + " is '" + value + "': expected " + s.values);
  return Status::Internal(std::string("undeclared switch ") + name);
}

Status parseFlag(const char* name, const char* value, bool& flag) {
  if (!value || !*value) return Status::Ok();
  const std::string text = value;
  if (text != "0" && text != "1") return malformed(name, text);
  flag = text == "1";
  return Status::Ok();
}

template <typename Enum>
Status parseChoice(const char* name, const char* value,
                   std::initializer_list<std::pair<const char*, Enum>> choices, Enum& out) {
  if (!value || !*value) return Status::Ok();
  for (const auto& [text, choice] : choices)
    if (std::string(value) == text) {
      out = choice;
      return Status::Ok();
    }
  return malformed(name, value);
}

Status parseFault(const char* value, RuntimeOptions& o) {
  if (!value || !*value) return Status::Ok();
  std::string spec = value;
  auto endsWith = [&](const std::string& action) {
    if (spec.size() <= action.size() ||
        spec.compare(spec.size() - action.size(), action.size(), action) != 0)
      return false;
    spec.resize(spec.size() - action.size());
    return true;
  };
  if (endsWith(":throw"))
    o.faultThrows = true;
  else if (endsWith(":pause"))
    o.faultPauses = true;
  auto number = [&](size_t at, long& out) {
    char* end = nullptr;
    out = std::strtol(spec.c_str() + at + 1, &end, 10);
    return end != spec.c_str() + at + 1 && *end == '\0';
  };
  if (size_t hash = spec.find('#'); hash != std::string::npos) {
    if (!number(hash, o.faultWhen) || o.faultWhen < 1) return malformed("DTC_FAULT", value);
    spec.resize(hash);
  }
  if (size_t at = spec.find('@'); at != std::string::npos) {
    long rank = 0;
    if (!number(at, rank) || rank < 0) return malformed("DTC_FAULT", value);
    o.faultRank = static_cast<int>(rank);
    spec.resize(at);
  }
  if (spec.empty()) return malformed("DTC_FAULT", value);
  o.faultPoint = spec;
  return Status::Ok();
}

}  // namespace

StatusOr<RuntimeOptions> parseRuntimeOptions(
    const std::function<const char*(const char*)>& lookup) {
  RuntimeOptions o;
  auto text = [&](const char* name) -> std::string {
    const char* value = lookup(name);
    return value ? value : "";
  };
  o.cudaBackend = text("DTC_CUDA_BACKEND");
  o.ncclLibrary = text("DTC_NCCL_LIBRARY");
  o.cudnnLibrary = text("DTC_CUDNN_LIBRARY");
  using C = RuntimeOptions::Collectives;
  using A = RuntimeOptions::Attention;
  DTC_RETURN_IF_ERROR(parseChoice("DTC_COLLECTIVES", lookup("DTC_COLLECTIVES"),
                                  {{"mpi", C::kMpi}, {"nccl", C::kNccl}}, o.collectives));
  DTC_RETURN_IF_ERROR(parseChoice(
      "DTC_CUDA_ATTENTION", lookup("DTC_CUDA_ATTENTION"),
      {{"auto", A::kAuto}, {"cudnn", A::kCudnn}, {"flash", A::kFlash}, {"gemm", A::kGemm}},
      o.cudaAttention));
  DTC_RETURN_IF_ERROR(parseFlag("DTC_CUDNN_DETERMINISTIC", lookup("DTC_CUDNN_DETERMINISTIC"),
                                o.cudnnDeterministic));
  DTC_RETURN_IF_ERROR(parseFlag("DTC_CUDA_GRAPHS", lookup("DTC_CUDA_GRAPHS"), o.cudaGraphs));
  DTC_RETURN_IF_ERROR(parseFlag("DTC_CUDA_OVERLAP", lookup("DTC_CUDA_OVERLAP"), o.cudaOverlap));
  DTC_RETURN_IF_ERROR(parseFlag("DTC_CUDA_TF32", lookup("DTC_CUDA_TF32"), o.cudaTf32));
  DTC_RETURN_IF_ERROR(
      parseFlag("DTC_CUDA_LT_EPILOGUES", lookup("DTC_CUDA_LT_EPILOGUES"), o.cudaLtEpilogues));
  DTC_RETURN_IF_ERROR(
      parseFlag("DTC_WATCHDOG_LIVENESS", lookup("DTC_WATCHDOG_LIVENESS"), o.watchdogLiveness));
  using S = RuntimeOptions::SnapshotCopy;
  DTC_RETURN_IF_ERROR(parseChoice("DTC_SNAPSHOT_COPY", lookup("DTC_SNAPSHOT_COPY"),
                                  {{"background", S::kBackground}, {"step", S::kStep}},
                                  o.snapshotCopy));
  DTC_RETURN_IF_ERROR(parseFault(lookup("DTC_FAULT"), o));
  return o;
}

namespace {

StatusOr<RuntimeOptions> fromEnvironment() {
  return parseRuntimeOptions([](const char* name) { return std::getenv(name); });
}

StatusOr<RuntimeOptions>& parsedOptions() {
  static StatusOr<RuntimeOptions> options = fromEnvironment();
  return options;
}

}  // namespace

const StatusOr<RuntimeOptions>& runtimeOptionsStatus() { return parsedOptions(); }

void reloadRuntimeOptions() { parsedOptions() = fromEnvironment(); }

const RuntimeOptions& runtimeOptions() {
  static const RuntimeOptions defaults;
  const StatusOr<RuntimeOptions>& parsed = runtimeOptionsStatus();
  return parsed.ok() ? *parsed : defaults;
}

std::string runtimeOptionsHelp() {
  std::string help;
  for (const Switch& s : kSwitches)
    help += "  " + std::string(s.name) + "=" + s.values + "  " + s.help + "\n";
  return help;
}

}  // namespace dtc
