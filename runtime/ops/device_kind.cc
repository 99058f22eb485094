#include "ops/device_kind.h"

#include "support/printable.h"

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
  std::vector<std::string> names;
  for (const DeviceKind& k : deviceKinds()) names.push_back(k.name);
  return alternatives(names);
}

}  // namespace dtc
