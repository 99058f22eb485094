// The mixture-of-experts ops and logsumexp on CUDA (cpu/cpu_moe_table.cc's), with the CPU's
// contracts (exec/moe_contracts.h). A routing plan entry outside the buffers cannot stop the
// stream: the kernels skip it and raise the step's error flag, reported at the next
// synchronisation with the CPU's message.
#include "cuda_bind.h"
#include "exec/moe_contracts.h"

namespace dtc::cuda {
namespace {

StatusOr<BoundStep> bindMoeRoute(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeRoute(ctx));
  const float* scores = ctx.inputs[0].f32();
  int64_t *expert = ctx.outputs[0].i64(), *slot = ctx.outputs[1].i64();
  float *weight = ctx.outputs[2].f32(), *load = ctx.outputs[3].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::moeRoute(scores, expert, slot, weight, load, d, d.normalize, stream),
                    where);
  });
}

StatusOr<BoundStep> bindMoeRouteGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeRouteGrad(ctx));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, moePlanOutsideMessage(d, false)));
  const float *dweight = ctx.inputs[0].f32(), *scores = ctx.inputs[1].f32();
  const int64_t* expert = ctx.inputs[2].i64();
  float* dscores = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::moeRouteGrad(dweight, scores, expert, dscores, d, d.normalize, bad, stream),
        where);
  });
}

StatusOr<BoundStep> bindMoeDispatch(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeDispatch(ctx));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, moePlanOutsideMessage(d)));
  const float* x = ctx.inputs[0].f32();
  const int64_t *expert = ctx.inputs[1].i64(), *slot = ctx.inputs[2].i64();
  float* buffer = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::moeDispatch(x, expert, slot, buffer, d, bad, stream), where);
  });
}

StatusOr<BoundStep> bindMoeDispatchGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeDispatchGrad(ctx));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, moePlanOutsideMessage(d)));
  const float* dbuffer = ctx.inputs[0].f32();
  const int64_t *expert = ctx.inputs[1].i64(), *slot = ctx.inputs[2].i64();
  float* dx = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::moeDispatchGrad(dbuffer, expert, slot, dx, d, bad, stream), where);
  });
}

StatusOr<BoundStep> bindMoeCombine(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeCombine(ctx));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, moePlanOutsideMessage(d)));
  const float* buffer = ctx.inputs[0].f32();
  const int64_t *expert = ctx.inputs[1].i64(), *slot = ctx.inputs[2].i64();
  const float* weight = ctx.inputs[3].f32();
  float* y = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::moeCombine(buffer, expert, slot, weight, y, d, bad, stream), where);
  });
}

StatusOr<BoundStep> bindMoeCombineGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeCombineGrad(ctx));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, moePlanOutsideMessage(d)));
  const float *dy = ctx.inputs[0].f32(), *buffer = ctx.inputs[1].f32();
  const int64_t *expert = ctx.inputs[2].i64(), *slot = ctx.inputs[3].i64();
  const float* weight = ctx.inputs[4].f32();
  float *dbuffer = ctx.outputs[0].f32(), *dweight = ctx.outputs[1].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::moeCombineGrad(dy, buffer, expert, slot, weight, dbuffer, dweight, d, bad, stream),
        where);
  });
}

StatusOr<BoundStep> bindLogSumExp(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const LogSumExpDims d, checkLogSumExp(ctx));
  const float* x = ctx.inputs[0].f32();
  float* y = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::logSumExp(x, y, d.rows, d.n, stream), where); });
}

StatusOr<BoundStep> bindLogSumExpGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const LogSumExpDims d, checkLogSumExpGrad(ctx));
  const float *dy = ctx.inputs[0].f32(), *x = ctx.inputs[1].f32(), *y = ctx.inputs[2].f32();
  float* dx = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::logSumExpGrad(dy, x, y, dx, d.rows, d.n, stream), where); });
}

}  // namespace

DTC_CUDA_BINDER(moe_route, bindMoeRoute)
DTC_CUDA_BINDER(moe_route_grad, bindMoeRouteGrad)
DTC_CUDA_BINDER(moe_dispatch, bindMoeDispatch)
DTC_CUDA_BINDER(moe_dispatch_grad, bindMoeDispatchGrad)
DTC_CUDA_BINDER(moe_combine, bindMoeCombine)
DTC_CUDA_BINDER(moe_combine_grad, bindMoeCombineGrad)
DTC_CUDA_BINDER(logsumexp, bindLogSumExp)
DTC_CUDA_BINDER(logsumexp_grad, bindLogSumExpGrad)

}  // namespace dtc::cuda
