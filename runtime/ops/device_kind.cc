#include "ops/device_kind.h"

namespace dtc {

const std::vector<DeviceKind>& deviceKinds() {
  static const std::vector<DeviceKind> kinds = {
      {"cpu", "the CPU backend", false, false, false, false, cpuStepScratchBytes, "cpu"},
      {"cuda", "the CUDA backend", true, true, true, true, cudaStepScratchBytes, "h100-80g"},
  };
  return kinds;
}

const DeviceKind* findDeviceKind(std::string_view name) {
  for (const DeviceKind& k : deviceKinds())
    if (name == k.name) return &k;
  return nullptr;
}

std::string deviceKindNames() {
  std::string names;
  const std::vector<DeviceKind>& kinds = deviceKinds();
  for (size_t i = 0; i < kinds.size(); ++i)
    names += std::string(i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + kinds[i].name;
  return names;
}

}  // namespace dtc
