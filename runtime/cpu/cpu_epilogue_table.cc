// The fused linear epilogues on the CPU (linear_bias, linear_bias_gelu, linear_grad_input_gelu):
// the GEMM, then the bias add and the GELU (or its gradient) by the very kernels the unfused
// steps use, on the GEMM's output in place, so an f32 fused step equals the unfused ones bit for
// bit. 16-bit x and weight come in widened (bindLowPrecision): the product is not rounded.
#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "exec/linear_epilogue_contract.h"

namespace dtc {
namespace {

template <LinearEpilogue Kind>
StatusOr<BoundStep> bindLinearEpilogue(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LinearEpilogueShape s, checkLinearEpilogue(ctx, Kind));
  const TensorView &a = ctx.inputs[0], &w = ctx.inputs[1], &third = ctx.inputs[2];
  const TensorView y = ctx.outputs[0];
  // linear_bias_gelu: the product and bias land in `pre`, the GELU of it in y.
  const TensorView sum = Kind == LinearEpilogue::kBiasGelu ? ctx.outputs[1] : y;
  ThreadPool* pool = &ctx.pool;
  const Shape outShape = y.shape, biasShape = third.shape;
  return BoundStep([=] {
    const bool forward = Kind != LinearEpilogue::kGradInputGelu;
    cpu::matmul(a.f32(), w.f32(), sum.f32(), s.rows, s.n, s.k, false, forward, *pool);
    const int64_t n = s.rows * s.n;
    if (forward)
      cpu::binary(cpu::BinaryOp::kAdd, sum.f32(), outShape, third.f32(), biasShape, sum.f32(),
                  outShape, *pool);
    if (Kind == LinearEpilogue::kBiasGelu) cpu::gelu(sum.f32(), y.f32(), n, true, *pool);
    if (Kind == LinearEpilogue::kGradInputGelu)
      cpu::geluGrad(y.f32(), third.f32(), y.f32(), n, true, *pool);
    return Status::Ok();
  });
}

// The weight gradient as linear_grad_weight computes it, then the bias gradient as reduce_sum over
// the leading dimensions computes it: in f32 the unfused steps' bits.
StatusOr<BoundStep> bindLinearGradWeightBias(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkLinearGradWeightBias(ctx).status());
  StepContext weight{
      ctx.step, {ctx.inputs[0], ctx.inputs[1]}, {ctx.outputs[0]}, ctx.pool, ctx.mesh};
  DTC_ASSIGN_OR_RETURN(BoundStep gemm, bindCpu_linear_grad_weight(weight));
  const TensorView dy = ctx.inputs[0], db = ctx.outputs[1];
  std::vector<int64_t> leading;
  for (size_t d = 0; d + 1 < dy.shape.size(); ++d) leading.push_back(static_cast<int64_t>(d));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(gemm());
    cpu::reduceSum(dy.f32(), dy.shape, leading, db.f32(), *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(linear_grad_weight_bias, bindLinearGradWeightBias)
DTC_CPU_BINDER(linear_bias, bindLinearEpilogue<LinearEpilogue::kBias>)
DTC_CPU_BINDER(linear_bias_gelu, bindLinearEpilogue<LinearEpilogue::kBiasGelu>)
DTC_CPU_BINDER(linear_grad_input_gelu, bindLinearEpilogue<LinearEpilogue::kGradInputGelu>)

}  // namespace dtc
