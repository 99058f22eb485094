// Parameters from a safetensors file under PyTorch's names (a `dtrun --save` output, or a
// state_dict PyTorch wrote with safetensors): fine-tuning and evaluation start from it. A
// parameter may appear under any of its names (a tied weight's aliases); float16 and bfloat16
// files are widened to the plan's float32.
#pragma once

#include <string>

#include "exec/executor.h"

namespace dtc::checkpoint {

// Checks `path` against every parameter of the plan: missing, unexpected and mis-shaped names
// are one error listing them. (BatchNorm's num_batches_tracked, which dtc does not keep, is
// ignored beside a running_mean the plan has.)
Status checkParametersFile(const Plan& plan, const std::string& path);

// Fills this rank's parameters from `path` (checked as above), reading only the rows that hold
// its blocks, then sends the state to the device. Optimizer state keeps its initial values.
Status loadParametersFile(Executor& ex, const std::string& path);

}  // namespace dtc::checkpoint
