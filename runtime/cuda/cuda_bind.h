// Shared pieces of the CUDA binders: the CPU's contract helpers (exec/bind_util.h) and the
// launch checks. Every binder validates exactly what its CPU counterpart does, then captures
// device pointers, the stream and its step's location in the closure it returns.
#pragma once

#include <string>

#include "cuda_check.h"
#include "cuda_device.h"
#include "exec/bind_util.h"
#include "kernels/launchers.h"

namespace dtc::cuda {

// The shapes bound steps see, with the kernels' name for them.
using kernels::Shape;

// A raised-flag message for data errors found on the device (see Device::errorFlag).
inline StatusOr<int*> dataErrorFlag(Device& device, const StepContext& ctx, const std::string& message) {
  return device.errorFlag(ctx.where() + message);
}

}  // namespace dtc::cuda
