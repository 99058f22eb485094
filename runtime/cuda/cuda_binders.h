// The CUDA backend's binders, one per kernel of ops/kernels.def, declared from it: a table file
// defines each with DTC_CUDA_BINDER, and bindCudaStep (cuda_backend.cc) indexes them by kernel
// code. A kernel without a CUDA binder is a link error naming bindCuda_<kernel>.
#pragma once

#include "cuda_device.h"

namespace dtc::cuda {

#define DTC_KERNEL(name, code, types, family, contract) \
  StatusOr<BoundStep> bindCuda_##name(const StepContext& ctx, Device& device);
#define DTC_POINTWISE(name, code, grad_name, grad_code, Math)  // generated in cuda_dispatch.cc
#include "ops/kernels.def"

// Defines kernel `name`'s CUDA binder as a call of the binder that follows.
#define DTC_CUDA_BINDER(name, ...)                                              \
  StatusOr<BoundStep> bindCuda_##name(const StepContext& ctx, Device& device) { \
    return __VA_ARGS__(ctx, device);                                            \
  }

// The binders indexed by kernel code (cuda_dispatch.cc), null where a code has no kernel.
const std::vector<CudaBinder>& cudaBinders();

}  // namespace dtc::cuda
