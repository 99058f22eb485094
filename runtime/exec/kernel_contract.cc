#include "exec/kernel_contract.h"

#include "exec/collective_contract.h"
#include "exec/conv_contracts.h"
#include "exec/core_contracts.h"
#include "exec/dropout_contract.h"
#include "exec/fp8_contracts.h"
#include "exec/layout_contracts.h"
#include "exec/linear_epilogue_contract.h"
#include "exec/loss_contracts.h"
#include "exec/moe_contracts.h"
#include "exec/norm_contracts.h"
#include "exec/precision_contracts.h"
#include "exec/transformer_contracts.h"
#include "ops/kernel_registry.h"

namespace dtc {
namespace {

Status statusOf(Status s) { return s; }
template <typename T>
Status statusOf(const StatusOr<T>& s) {
  return s.status();
}

Status dispatch(const StepContext& ctx) {
  switch (ctx.step.kernel()) {
    // One case per kernel; clang-format would fold the #include into the macro.
    // clang-format off
#define DTC_KERNEL(name, code, types, family, contract) \
    case Kernel::name: return statusOf(contract);
#include "ops/kernels.def"
    // clang-format on
    default: return ctx.kernel().status();  // only a code unknown to the registry gets here
  }
}

}  // namespace

Status checkKernelContract(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const KernelInfo* kernel, ctx.kernel());
  if (kernel->types != KernelTypes::kFloat) return dispatch(ctx);
  StepContext wide{ctx.step, ctx.inputs, ctx.outputs, ctx.pool, ctx.mesh};
  for (auto* list : {&wide.inputs, &wide.outputs})
    for (TensorView& t : *list)
      if (lowPrecision(t.dtype)) t.dtype = DType::kF32;
  return dispatch(wide);
}

}  // namespace dtc
