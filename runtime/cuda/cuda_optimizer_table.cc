// Optimizer updates on CUDA (cpu/cpu_optimizer_table.cc's ops), with the CPU's contracts
// (exec/core_contracts.h). Scalars the CPU reads on the host (AdamW's step counter, the learning
// rate) are read by the kernels on the device.
#include "cuda_bind.h"
#include "exec/core_contracts.h"

namespace dtc::cuda {
namespace {

StatusOr<BoundStep> bindSgd(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(SgdParams h, checkSgd(ctx));
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], buf = ctx.inputs[2], lr = ctx.inputs[3];
  TensorView pOut = ctx.outputs[0], bufOut = ctx.outputs[1];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::sgd(p.f32(), g.f32(), buf.f32(), pOut.f32(), bufOut.f32(),
                                 p.numElements(), lr.f32(), h.momentum, h.weightDecay, stream),
                    where);
  });
}

StatusOr<BoundStep> bindAdamw(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(AdamwParams h, checkAdamw(ctx));
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], m = ctx.inputs[2], v = ctx.inputs[3];
  TensorView step = ctx.inputs[4], lr = ctx.inputs[5];
  TensorView pOut = ctx.outputs[0], mOut = ctx.outputs[1], vOut = ctx.outputs[2];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::adamw(p.f32(), g.f32(), m.f32(), v.f32(), pOut.f32(), mOut.f32(),
                                   vOut.f32(), p.numElements(), step.f32(), lr.f32(), h.beta1,
                                   h.beta2, h.eps, h.weightDecay, stream),
                    where);
  });
}

// One parameter group in a few launches (kernels::multiTensorAdamw), each element as
// adamw_update computes it.
StatusOr<BoundStep> bindMultiTensorAdamw(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(AdamwParams h, checkMultiTensorAdamw(ctx));
  const size_t count = ctx.outputs.size() / 3;
  std::vector<kernels::AdamwTensor> tensors(count);
  for (size_t t = 0; t < count; ++t) {
    const TensorView* in = &ctx.inputs[4 * t];
    const TensorView* out = &ctx.outputs[3 * t];
    tensors[t] = {in[0].f32(),  in[1].f32(),  in[2].f32(),  in[3].f32(),
                  out[0].f32(), out[1].f32(), out[2].f32(), in[0].numElements()};
  }
  const float* step = ctx.inputs[4 * count].f32();
  const float* lr = ctx.inputs[4 * count + 1].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::multiTensorAdamw(tensors, step, lr, h.beta1, h.beta2, h.eps,
                                              h.weightDecay, stream),
                    where);
  });
}

}  // namespace

DTC_CUDA_BINDER(sgd_update, bindSgd)
DTC_CUDA_BINDER(adamw_update, bindAdamw)
DTC_CUDA_BINDER(multi_tensor_adamw, bindMultiTensorAdamw)

}  // namespace dtc::cuda
