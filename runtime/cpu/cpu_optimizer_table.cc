// The CPU backend's optimizer updates: SGD with momentum and AdamW as torch.optim computes them,
// and AdamW over a parameter group in one step; with the contracts of exec/core_contracts.h.
#include <vector>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "exec/core_contracts.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindSgd(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(SgdParams h, checkSgd(ctx));
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], buf = ctx.inputs[2], lr = ctx.inputs[3];
  TensorView pOut = ctx.outputs[0], bufOut = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::sgd(p.f32(), g.f32(), buf.f32(), pOut.f32(), bufOut.f32(), p.numElements(), *lr.f32(),
             h.momentum, h.weightDecay, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindAdamw(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(AdamwParams h, checkAdamw(ctx));
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], m = ctx.inputs[2], v = ctx.inputs[3];
  TensorView step = ctx.inputs[4], lr = ctx.inputs[5];
  TensorView pOut = ctx.outputs[0], mOut = ctx.outputs[1], vOut = ctx.outputs[2];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::adamw(p.f32(), g.f32(), m.f32(), v.f32(), pOut.f32(), mOut.f32(), vOut.f32(),
               p.numElements(), *step.f32(), *lr.f32(), h.beta1, h.beta2, h.eps, h.weightDecay,
               *pool);
    return Status::Ok();
  });
}

// One parameter group's tensors, one after the other: each as adamw_update computes it.
StatusOr<BoundStep> bindMultiTensorAdamw(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(AdamwParams h, checkMultiTensorAdamw(ctx));
  const size_t tensors = ctx.outputs.size() / 3;
  std::vector<TensorView> in(ctx.inputs.begin(), ctx.inputs.end());
  std::vector<TensorView> out(ctx.outputs.begin(), ctx.outputs.end());
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    const float step = *in[4 * tensors].f32(), lr = *in[4 * tensors + 1].f32();
    for (size_t t = 0; t < tensors; ++t)
      cpu::adamw(in[4 * t].f32(), in[4 * t + 1].f32(), in[4 * t + 2].f32(), in[4 * t + 3].f32(),
                 out[3 * t].f32(), out[3 * t + 1].f32(), out[3 * t + 2].f32(),
                 in[4 * t].numElements(), step, lr, h.beta1, h.beta2, h.eps, h.weightDecay, *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(sgd_update, bindSgd)
DTC_CPU_BINDER(adamw_update, bindAdamw)
DTC_CPU_BINDER(multi_tensor_adamw, bindMultiTensorAdamw)

}  // namespace dtc
