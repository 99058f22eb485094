// The CPU backend's binders, one per kernel of ops/kernels.def, declared from it: a table file
// defines each with DTC_CPU_BINDER, and the dispatch (cpu_dispatch.cc) indexes them by kernel
// code. A kernel without a CPU binder is a link error naming bindCpu_<kernel>.
#pragma once

#include "exec/bind_util.h"

namespace dtc {

#define DTC_KERNEL(name, code, types, family, contract) \
  StatusOr<BoundStep> bindCpu_##name(const StepContext& ctx);
#define DTC_POINTWISE(name, code, grad_name, grad_code, Math)  // generated in cpu_dispatch.cc
#include "ops/kernels.def"

// Defines kernel `name`'s CPU binder as a call of the binder that follows (a function, or a
// template instance, whose arguments may hold commas).
#define DTC_CPU_BINDER(name, ...) \
  StatusOr<BoundStep> bindCpu_##name(const StepContext& ctx) { return __VA_ARGS__(ctx); }

// A step on bf16/f16 operands run by its float32 binder `wide` on widened copies, the results
// rounded back (cpu_kernel_table.cc).
StatusOr<BoundStep> bindWidened(const StepContext& ctx, Binder wide);

}  // namespace dtc
