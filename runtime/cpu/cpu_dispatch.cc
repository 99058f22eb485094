// The CPU backend's dispatch, generated from ops/kernels.def: a step's kernel code indexes the
// table of binders (cpu_binders.h); the registry's element types decide whether 16-bit operands
// run natively or on widened copies; pointwise kernels are instantiated from their math
// (ops/pointwise_math.h) here, with no table entry of their own.
#include <vector>

#include "cpu/cpu_binders.h"
#include "exec/precision_contracts.h"
#include "ops/kernel_registry.h"
#include "ops/pointwise_math.h"

namespace dtc {
namespace {

// Transcendental kernels cost ~10-20x a plain add per element, so they split early.
constexpr int64_t kPointwiseGrain = 2048;

// The pointwise kernels' loops, bound by the table's unary and activation-gradient binders.
template <typename Math>
void forwardLoop(const float* x, float* y, int64_t n, ThreadPool& pool) {
  pool.parallelFor(n, kPointwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = Math::forward(x[i]);
  });
}

template <typename Math>
void gradientLoop(const float* dy, const float* at, float* dx, int64_t n, ThreadPool& pool) {
  pool.parallelFor(n, kPointwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dx[i] = Math::gradient(dy[i], at[i]);
  });
}

const std::vector<Binder>& binders() {
  static const std::vector<Binder> table = [] {
    std::vector<Binder> t(kernelCodeLimit(), nullptr);
#define DTC_KERNEL(name, code, types, family, contract) t[code] = &bindCpu_##name;
#define DTC_POINTWISE(name, code, grad_name, grad_code, Math) \
  t[code] = &bindUnary<forwardLoop<pointwise::Math>>;         \
  t[grad_code] = &bindActivationGrad<gradientLoop<pointwise::Math>>;
#include "ops/kernels.def"
    return t;
  }();
  return table;
}

}  // namespace

StatusOr<BoundStep> bindCpuStep(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const KernelInfo* kernel, ctx.kernel());
  const Binder bind = binders()[static_cast<uint16_t>(kernel->kernel)];
  // 16-bit operands (mixed precision) of the kernels that take them run on f32 copies: exact for
  // moves, and sums and contractions in f32 are the more accurate.
  if (kernel->types == KernelTypes::kFloat && firstLowPrecision(ctx)) return bindWidened(ctx, bind);
  return bind(ctx);
}

}  // namespace dtc
