// One function's bound steps replayed as a CUDA graph: the steady-state training step launched
// as one graph instead of hundreds of kernel launches, each with its host-side checks.
#pragma once

#include <string>
#include <vector>

#include "cuda_device.h"

namespace dtc::cuda {

// Whether CUDA graphs are on (DTC_CUDA_GRAPHS, unless "0").
bool cudaGraphsEnabled();

// One step that runs `steps` (a function's, ending with its join of the comm stream): eagerly on
// its first call (the warm-up, where lazy set-up happens: NCCL communicators, cuBLAS's
// heuristics), captured into a graph on its second and launched, the graph launched alone on
// every later call. A step that waited for the host during the warm-up (Device::hostSyncs) keeps
// the function eager, silently: that is its nature. A capture that fails (an operation the
// capture does not allow, instantiation) is abandoned cleanly, the function runs eagerly for
// good, and one line on stderr says so; the steps then run eagerly at once, so an error of a step
// itself is still returned.
BoundStep capturedSteps(Device& device, std::vector<BoundStep> steps, std::string function);

}  // namespace dtc::cuda
