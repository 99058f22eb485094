// The kinds of device a plan is compiled for and a backend runs on, each with what differs
// between them for the code that does not run kernels itself (the compiler's memory plan and
// defaults, the cost model, calibration, the trainer): one row each, so that no caller tests a
// device's name. A backend reports its kind (exec/backend.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ops/step_scratch.h"

namespace dtc {

struct DeviceKind {
  const char* name;     // as plans, device profiles and --device name it
  const char* summary;  // for messages: what runs it
  // A GPU: the compiler fuses attention, epilogues and optimizer updates by default, and
  // calibration measures it at a large model's sizes.
  bool gpu = false;
  // Collectives run on their own stream, beside the computation that does not need them.
  bool overlapsCollectives = false;
  // 16-bit attention over whole sequences runs on a library's fused kernels (cuDNN), priced
  // with the profile's fused-projection curve.
  bool libraryAttention = false;
  // The GEMM libraries take a workspace at the start of the arena (kBlasWorkspaceBytes).
  bool blasWorkspace = false;
  // The bytes of scratch a step is given beside its operands.
  uint64_t (*stepScratchBytes)(const ScratchStep& step) = nullptr;
  // The shipped device profile that prices its plans unless another is named.
  const char* defaultProfile = "";
};

// Every kind, in the order messages list them.
const std::vector<DeviceKind>& deviceKinds();
// The kind named `name`, or null.
const DeviceKind* findDeviceKind(std::string_view name);
// The kinds' names as a message lists them: "cpu or cuda".
std::string deviceKindNames();

}  // namespace dtc
