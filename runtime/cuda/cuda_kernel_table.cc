// The CUDA backend's core kernel table (cpu/cpu_kernel_table.cc's ops): the CPU's contracts
// (exec/core_contracts.h) checked at bind time, then cuBLAS GEMMs and the element-wise and
// reduction kernels.
#include <cstring>

#include "cuda_bind.h"
#include "exec/core_contracts.h"
#include "exec/dropout_contract.h"
#include "gemm.h"

namespace dtc::cuda {
namespace {

using kernels::Activation;
using kernels::BinaryOp;

// The operands' element types (contractionTypes) are the GEMM's.
StatusOr<BoundStep> bindGemm(const StepContext& ctx, Device& dev, const void* a, const void* b,
                             void* c, GemmShape shape, ContractionTypes types) {
  const std::string where = ctx.where();
  DTC_RETURN_IF_ERROR(checkGemm(shape, where));
  shape.type = types.type;
  shape.f32Output = types.f32Output;
  cublasHandle_t handle = dev.blas();
  const bool tf32 = dev.tf32();
  return BoundStep([=] { return gemm(handle, tf32, a, b, c, shape, where); });
}

// The GEMM of matmul and the linear family, C = op(A) · op(B), on the step's operands.
StatusOr<BoundStep> bindGemmDims(const StepContext& ctx, Device& dev, const GemmDims& g,
                                 ContractionTypes types) {
  return bindGemm(ctx, dev, ctx.inputs[0].data, ctx.inputs[1].data, ctx.outputs[0].data,
                  {g.m, g.n, g.k, g.transA, g.transB, 1}, types);
}

StatusOr<BoundStep> bindMatmul(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(ContractionTypes types, contractionTypes(ctx));
  DTC_ASSIGN_OR_RETURN(GemmDims g, matmulDims(ctx));
  return bindGemmDims(ctx, dev, g, types);
}

// linear, linear_grad_input, linear_grad_weight: one GEMM on the leading dimensions flattened.
template <LinearKind Kind>
StatusOr<BoundStep> bindLinear(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(ContractionTypes types, contractionTypes(ctx));
  DTC_ASSIGN_OR_RETURN(GemmDims g, linearDims(ctx, Kind));
  return bindGemmDims(ctx, dev, g, types);
}

// out = a op b, or (b null) out = a + 0 broadcast to out's shape.
StatusOr<BoundStep> bindBroadcasting(const StepContext& ctx, Device& dev, BinaryOp op,
                                     const TensorView& a, const TensorView* b,
                                     const TensorView& out) {
  kernels::BroadcastPlan plan;
  if (!kernels::makeBroadcastPlan(a.shape, b ? b->shape : Shape{}, out.shape, plan))
    return invalid(ctx, "broadcasting " + str(a.shape) + " to " + str(out.shape) +
                            " needs more than " + std::to_string(kernels::kMaxDims) +
                            " dimensions (the CUDA kernels' limit)");
  const float *pa = a.f32(), *pb = b ? b->f32() : nullptr;
  float* po = out.f32();
  const int64_t total = out.numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::binary(op, pa, pb, po, plan, total, stream), where); });
}

template <BinaryOp Op>
StatusOr<BoundStep> bindBinary(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkBinary(ctx));
  return bindBroadcasting(ctx, dev, Op, ctx.inputs[0], &ctx.inputs[1], ctx.outputs[0]);
}

StatusOr<BoundStep> bindBroadcast(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkBroadcast(ctx));
  return bindBroadcasting(ctx, dev, BinaryOp::kAdd, ctx.inputs[0], nullptr, ctx.outputs[0]);
}

StatusOr<BoundStep> bindReduceSum(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, checkReduceSum(ctx));
  const TensorView &x = ctx.inputs[0], &out = ctx.outputs[0];
  kernels::ReducePlan plan;
  if (!kernels::makeReducePlan(x.shape, axes, plan))
    return invalid(ctx, "reducing " + str(x.shape) + " needs more than " +
                            std::to_string(kernels::kMaxDims) +
                            " dimensions (the CUDA kernels' limit)");
  DTC_ASSIGN_OR_RETURN(void* partial, stepScratch(ctx, dev, plan.scratchBytes()));
  const float* px = x.f32();
  float* po = out.f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::reduceSum(px, po, plan, partial, stream), where); });
}

// Any element type: labels are reshaped too. Partly overlapping storage (memmove on the CPU)
// goes through a scratch copy.
StatusOr<BoundStep> bindReshape(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const size_t bytes, checkReshape(ctx));
  const uint8_t* from = ctx.inputs[0].data;
  uint8_t* to = ctx.outputs[0].data;
  if (to == from || bytes == 0) return BoundStep([] { return Status::Ok(); });
  uint8_t* tmp = nullptr;
  if (from < to + bytes && to < from + bytes) {
    DTC_ASSIGN_OR_RETURN(void* scratch, dev.scratch(bytes));
    tmp = static_cast<uint8_t*>(scratch);
  }
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    if (tmp) {
      DTC_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpyAsync(tmp, from, bytes, cudaMemcpyDeviceToDevice, stream), where + "a copy"));
      return cudaStatus(cudaMemcpyAsync(to, tmp, bytes, cudaMemcpyDeviceToDevice, stream),
                        where + "a copy");
    }
    return cudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream),
                      where + "a copy");
  });
}

StatusOr<BoundStep> bindFill(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const float value, checkFill(ctx));
  float* out = ctx.outputs[0].f32();
  const int64_t n = ctx.outputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::fill(out, n, value, stream), where); });
}

StatusOr<BoundStep> bindScale(const StepContext& ctx, Device& dev) {
  const float factor = static_cast<float>(ctx.floatAttr("factor"));
  return bindUnaryLaunch(ctx, dev,
                         [factor](const float* x, float* y, int64_t n, cudaStream_t stream) {
                           return kernels::scale(x, y, n, factor, stream);
                         });
}

StatusOr<BoundStep> bindPow(const StepContext& ctx, Device& dev) {
  const float exponent = static_cast<float>(ctx.floatAttr("exponent"));
  return bindUnaryLaunch(ctx, dev,
                         [exponent](const float* x, float* y, int64_t n, cudaStream_t stream) {
                           return kernels::power(x, y, n, exponent, stream);
                         });
}

StatusOr<BoundStep> bindDropout(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(DropoutStep d, checkDropout(ctx));
  const float* x = ctx.inputs[0].f32();
  const int64_t* rng = ctx.inputs[1].i64();
  float* y = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(
        kernels::dropoutApply(x, y, d.elements, rng, d.placement, d.key, d.ratio, stream), where);
  });
}

StatusOr<BoundStep> bindActivation(const StepContext& ctx, Device& dev, Activation f) {
  return bindUnaryLaunch(ctx, dev, [f](const float* x, float* y, int64_t n, cudaStream_t stream) {
    return kernels::activation(f, x, y, n, stream);
  });
}

StatusOr<BoundStep> bindActivationGrad(const StepContext& ctx, Device& dev, Activation f) {
  return bindUnaryGradLaunch(
      ctx, dev, [f](const float* dy, const float* at, float* dx, int64_t n, cudaStream_t stream) {
        return kernels::activationGrad(f, dy, at, dx, n, stream);
      });
}

template <Activation F>
StatusOr<BoundStep> bindUnary(const StepContext& ctx, Device& dev) {
  return bindActivation(ctx, dev, F);
}

template <Activation F>
StatusOr<BoundStep> bindUnaryGrad(const StepContext& ctx, Device& dev) {
  return bindActivationGrad(ctx, dev, F);
}

Activation geluForm(const StepContext& ctx) {
  return geluTanh(ctx) ? Activation::kGeluTanh : Activation::kGeluErf;
}

StatusOr<BoundStep> bindGelu(const StepContext& ctx, Device& dev) {
  return bindActivation(ctx, dev, geluForm(ctx));
}
StatusOr<BoundStep> bindGeluGrad(const StepContext& ctx, Device& dev) {
  return bindActivationGrad(ctx, dev, geluForm(ctx));
}

}  // namespace

DTC_CUDA_BINDER(matmul, bindMatmul)
DTC_CUDA_BINDER(linear, bindLinear<LinearKind::kForward>)
DTC_CUDA_BINDER(linear_grad_input, bindLinear<LinearKind::kGradInput>)
DTC_CUDA_BINDER(linear_grad_weight, bindLinear<LinearKind::kGradWeight>)
DTC_CUDA_BINDER(add, bindBinary<BinaryOp::kAdd>)
DTC_CUDA_BINDER(sub, bindBinary<BinaryOp::kSub>)
DTC_CUDA_BINDER(mul, bindBinary<BinaryOp::kMul>)
DTC_CUDA_BINDER(div, bindBinary<BinaryOp::kDiv>)
DTC_CUDA_BINDER(reduce_sum, bindReduceSum)
DTC_CUDA_BINDER(broadcast, bindBroadcast)
DTC_CUDA_BINDER(reshape, bindReshape)
DTC_CUDA_BINDER(fill, bindFill)
DTC_CUDA_BINDER(relu, bindUnary<Activation::kRelu>)
DTC_CUDA_BINDER(relu_grad, bindUnaryGrad<Activation::kRelu>)
DTC_CUDA_BINDER(tanh, bindUnary<Activation::kTanh>)
DTC_CUDA_BINDER(tanh_grad, bindUnaryGrad<Activation::kTanh>)
DTC_CUDA_BINDER(gelu, bindGelu)
DTC_CUDA_BINDER(gelu_grad, bindGeluGrad)
DTC_CUDA_BINDER(scale, bindScale)
DTC_CUDA_BINDER(pow, bindPow)
DTC_CUDA_BINDER(dropout, bindDropout)

}  // namespace dtc::cuda
