// The contract hook generated from ops/kernels.def: the executor checks every step against its
// kernel's operand contract before a backend binds it, so the CPU and CUDA backends accept the
// same steps and refuse the others with the same message.
#pragma once

#include "exec/step.h"

namespace dtc {

// The step's operands and attributes against its kernel's contract (exec/*_contracts.h). The
// element types are the registry's to judge: 16-bit operands of a kernel that takes them are
// checked as float32 (their shapes are what the contract constrains).
Status checkKernelContract(const StepContext& ctx);

}  // namespace dtc
