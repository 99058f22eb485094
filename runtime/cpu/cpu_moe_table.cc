// Bindings of the mixture-of-experts ops and logsumexp (cpu/kernels/moe_kernels.h), with the
// contracts of exec/moe_contracts.h. A routing plan's entries are data: a kernel that finds one
// outside the buffers fails the step rather than write there.
#include <string>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/moe_kernels.h"
#include "exec/moe_contracts.h"

namespace dtc {
namespace {

// The step's result once its kernel has checked the plan.
Status planChecked(bool inside, const std::string& where, const MoeDims& d, bool slots = true) {
  return inside ? Status::Ok() : Status::InvalidInput(where + moePlanOutsideMessage(d, slots));
}

StatusOr<BoundStep> bindMoeRoute(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeRoute(ctx));
  TensorView scores = ctx.inputs[0], expert = ctx.outputs[0], slot = ctx.outputs[1];
  TensorView weight = ctx.outputs[2], load = ctx.outputs[3];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::moeRoute(scores.f32(), expert.i64(), slot.i64(), weight.f32(), load.f32(), d, d.normalize,
                  *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMoeRouteGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeRouteGrad(ctx));
  TensorView dweight = ctx.inputs[0], scores = ctx.inputs[1], expert = ctx.inputs[2];
  TensorView dscores = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  const std::string where = ctx.where();
  return BoundStep([=] {
    return planChecked(cpu::moeRouteGrad(dweight.f32(), scores.f32(), expert.i64(), dscores.f32(),
                                         d, d.normalize, *pool),
                       where, d, false);
  });
}

StatusOr<BoundStep> bindMoeDispatch(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeDispatch(ctx));
  TensorView x = ctx.inputs[0], expert = ctx.inputs[1], slot = ctx.inputs[2];
  TensorView buffer = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  const std::string where = ctx.where();
  return BoundStep([=] {
    return planChecked(cpu::moeDispatch(x.f32(), expert.i64(), slot.i64(), buffer.f32(), d, *pool),
                       where, d);
  });
}

StatusOr<BoundStep> bindMoeDispatchGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeDispatchGrad(ctx));
  TensorView dbuffer = ctx.inputs[0], expert = ctx.inputs[1], slot = ctx.inputs[2];
  TensorView dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  const std::string where = ctx.where();
  return BoundStep([=] {
    return planChecked(
        cpu::moeDispatchGrad(dbuffer.f32(), expert.i64(), slot.i64(), dx.f32(), d, *pool), where,
        d);
  });
}

StatusOr<BoundStep> bindMoeCombine(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeCombine(ctx));
  TensorView buffer = ctx.inputs[0], expert = ctx.inputs[1], slot = ctx.inputs[2];
  TensorView weight = ctx.inputs[3], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  const std::string where = ctx.where();
  return BoundStep([=] {
    return planChecked(
        cpu::moeCombine(buffer.f32(), expert.i64(), slot.i64(), weight.f32(), y.f32(), d, *pool),
        where, d);
  });
}

StatusOr<BoundStep> bindMoeCombineGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const MoeDims d, checkMoeCombineGrad(ctx));
  TensorView dy = ctx.inputs[0], buffer = ctx.inputs[1], expert = ctx.inputs[2];
  TensorView slot = ctx.inputs[3], weight = ctx.inputs[4];
  TensorView dbuffer = ctx.outputs[0], dweight = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  const std::string where = ctx.where();
  return BoundStep([=] {
    return planChecked(cpu::moeCombineGrad(dy.f32(), buffer.f32(), expert.i64(), slot.i64(),
                                           weight.f32(), dbuffer.f32(), dweight.f32(), d, *pool),
                       where, d);
  });
}

StatusOr<BoundStep> bindLogSumExp(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const LogSumExpDims d, checkLogSumExp(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::logSumExp(x.f32(), y.f32(), d.rows, d.n, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindLogSumExpGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const LogSumExpDims d, checkLogSumExpGrad(ctx));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], y = ctx.inputs[2], dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::logSumExpGrad(dy.f32(), x.f32(), y.f32(), dx.f32(), d.rows, d.n, *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(moe_route, bindMoeRoute)
DTC_CPU_BINDER(moe_route_grad, bindMoeRouteGrad)
DTC_CPU_BINDER(moe_dispatch, bindMoeDispatch)
DTC_CPU_BINDER(moe_dispatch_grad, bindMoeDispatchGrad)
DTC_CPU_BINDER(moe_combine, bindMoeCombine)
DTC_CPU_BINDER(moe_combine_grad, bindMoeCombineGrad)
DTC_CPU_BINDER(logsumexp, bindLogSumExp)
DTC_CPU_BINDER(logsumexp_grad, bindLogSumExpGrad)

}  // namespace dtc
