// The CUDA backend's dispatch table, generated from ops/kernels.def: the binders of
// cuda_binders.h by kernel code, and the pointwise kernels' binders instantiated from their math
// (ops/pointwise_math.h, kernels/pointwise.cu).
#include "cuda_bind.h"
#include "ops/kernel_registry.h"
#include "ops/pointwise_math.h"

namespace dtc::cuda {
namespace {

template <typename Math>
StatusOr<BoundStep> bindPointwise(const StepContext& ctx, Device& dev) {
  return bindUnaryLaunch(ctx, dev, &kernels::pointwise<Math>);
}

template <typename Math>
StatusOr<BoundStep> bindPointwiseGrad(const StepContext& ctx, Device& dev) {
  return bindUnaryGradLaunch(ctx, dev, &kernels::pointwiseGrad<Math>);
}

}  // namespace

const std::vector<CudaBinder>& cudaBinders() {
  static const std::vector<CudaBinder> table = [] {
    std::vector<CudaBinder> t(kernelCodeLimit(), nullptr);
#define DTC_KERNEL(name, code, types, family, contract) t[code] = &bindCuda_##name;
#define DTC_POINTWISE(name, code, grad_name, grad_code, Math) \
  t[code] = &bindPointwise<dtc::pointwise::Math>;             \
  t[grad_code] = &bindPointwiseGrad<dtc::pointwise::Math>;
#include "ops/kernels.def"
    return t;
  }();
  return table;
}

}  // namespace dtc::cuda
