// The ConvNet's ops on CUDA (cpu/cpu_conv_table.cc's, with the contracts of
// exec/conv_contracts.h): conv2d and its gradients as im2col + batched cuBLAS GEMMs over the
// samples, max pooling, and BatchNorm (fused and synchronised forms).
#include "cuda_bind.h"
#include "exec/conv_contracts.h"
#include "gemm.h"

namespace dtc::cuda {
namespace {

using kernels::ConvDims;
using kernels::NormDims;
using kernels::PoolDims;

template <ConvOp Op>
StatusOr<BoundStep> bindConv(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(ConvShape s, checkConv2d(ctx, Op));
  const ConvDims g{s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, s.oh, s.ow};
  const TensorView &in0 = ctx.inputs[0], &in1 = ctx.inputs[1], &out = ctx.outputs[0];
  const int64_t k = g.c * g.kh * g.kw, p = g.oh * g.ow;
  const std::string where = ctx.where();
  GemmShape shape;
  if (Op == ConvOp::kForward)  // y[s] [O, p] = w [O, k] · col[s] [k, p]
    shape = {g.o, p, k, false, false, g.n, 0, k * p, g.o * p};
  else if (Op == ConvOp::kGradInput)  // col[s] [k, p] = wᵀ [k, O] · dy[s] [O, p]
    shape = {k, p, g.o, true, false, g.n, 0, g.o * p, k * p};
  else  // part[s] [O, k] = dy[s] [O, p] · col[s]ᵀ [p, k]
    shape = {g.o, k, p, false, true, g.n, g.o * p, k * p, g.o * k};
  DTC_RETURN_IF_ERROR(checkGemm(shape, where));
  const kernels::ConvScratch layout =
      kernels::convScratch(g.n, k, p, g.o, Op == ConvOp::kGradWeight);
  DTC_ASSIGN_OR_RETURN(uint8_t * scratch, stepScratch(ctx, dev, layout.bytes));
  float* col = reinterpret_cast<float*>(scratch + layout.col);
  float* parts =
      Op == ConvOp::kGradWeight ? reinterpret_cast<float*>(scratch + layout.parts) : nullptr;
  const float *a = in0.f32(), *b = in1.f32();
  float* o = out.f32();
  float* c = col;
  cudaStream_t stream = dev.stream();
  cublasHandle_t handle = dev.blas();
  const bool tf32 = dev.tf32();
  return BoundStep([=]() -> Status {
    if (Op == ConvOp::kForward) {
      DTC_RETURN_IF_ERROR(launched(kernels::im2col(a, c, g, stream), where));
      return gemm(handle, tf32, b, c, o, shape, where);
    }
    if (Op == ConvOp::kGradInput) {
      DTC_RETURN_IF_ERROR(gemm(handle, tf32, b, a, c, shape, where));
      return launched(kernels::col2im(c, o, g, stream), where);
    }
    // Per-sample weight gradients, then their sum over the batch (in double: deterministic).
    DTC_RETURN_IF_ERROR(launched(kernels::im2col(b, c, g, stream), where));
    DTC_RETURN_IF_ERROR(gemm(handle, tf32, a, c, parts, shape, where));
    return launched(kernels::sumBatches(parts, g.n, g.o * k, o, stream), where);
  });
}

PoolDims poolOf(const PoolShape& s) {
  return {s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.oh, s.ow};
}

StatusOr<BoundStep> bindMaxPool2d(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(PoolShape shape, checkMaxPool2d(ctx));
  const PoolDims g = poolOf(shape);
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::maxPool2d(x.f32(), y.f32(), g, stream), where); });
}

StatusOr<BoundStep> bindMaxPool2dGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(PoolShape shape, checkMaxPool2dGrad(ctx));
  const PoolDims g = poolOf(shape);
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], dx = ctx.outputs[0];
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::maxPool2dGrad(dy.f32(), x.f32(), dx.f32(), g, stream), where);
  });
}

// The operands' device pointers, for the binders below.
struct Operands {
  std::vector<const float*> in;
  std::vector<float*> out;
  explicit Operands(const StepContext& ctx) {
    for (const TensorView& t : ctx.inputs) in.push_back(t.f32());
    for (const TensorView& t : ctx.outputs) out.push_back(t.f32());
  }
};

// A BatchNorm step: its contract (exec/conv_contracts.h), then one kernel,
// launch(inputs, outputs, dims, checked, stream), on the operands' device pointers.
using NormCheck = StatusOr<BatchNormDims> (*)(const StepContext&);
template <NormCheck Check, typename Launch>
StatusOr<BoundStep> bindNorm(const StepContext& ctx, Device& dev, Launch launch) {
  DTC_ASSIGN_OR_RETURN(const BatchNormDims b, Check(ctx));
  const NormDims d{b.n, b.c, b.s};
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(launch(p.in, p.out, d, b, stream), where); });
}

using In = std::vector<const float*>;
using Out = std::vector<float*>;

StatusOr<BoundStep> bindBatchNormTrain(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormTrain>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims& b, cudaStream_t stream) {
        return kernels::batchNormTrain(i[0], i[1], i[2], i[3], i[4], o[0], o[1], o[2], o[3], o[4],
                                       d, b.eps, b.momentum, stream);
      });
}

StatusOr<BoundStep> bindBatchNormTrainGrad(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormTrainGrad>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims&, cudaStream_t stream) {
        return kernels::batchNormTrainGrad(i[0], i[1], i[2], i[3], i[4], o[0], o[1], o[2], d,
                                           stream);
      });
}

StatusOr<BoundStep> bindBatchNormEval(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormEval>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims& b, cudaStream_t stream) {
        return kernels::batchNormEval(i[0], i[1], i[2], i[3], i[4], o[0], d, b.eps, stream);
      });
}

StatusOr<BoundStep> bindBatchNormSum(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormSum>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims&, cudaStream_t stream) {
        return kernels::batchNormSum(i[0], o[0], d, stream);
      });
}

StatusOr<BoundStep> bindBatchNormCenteredSquares(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormCenteredSquares>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims& b, cudaStream_t stream) {
        return kernels::batchNormCenteredSquares(i[0], i[1], o[0], d, b.count, stream);
      });
}

StatusOr<BoundStep> bindBatchNormNormalize(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormNormalize>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims& b, cudaStream_t stream) {
        return kernels::batchNormNormalize(i[0], i[1], i[2], i[3], i[4], i[5], i[6], o[0], o[1],
                                           o[2], o[3], o[4], d, b.count, b.eps, b.momentum, stream);
      });
}

StatusOr<BoundStep> bindBatchNormGradSums(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormGradSums>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims&, cudaStream_t stream) {
        return kernels::batchNormGradSums(i[0], i[1], i[2], i[3], o[0], o[1], d, stream);
      });
}

StatusOr<BoundStep> bindBatchNormGradInput(const StepContext& ctx, Device& dev) {
  return bindNorm<checkBatchNormGradInput>(
      ctx, dev,
      [](const In& i, const Out& o, NormDims d, const BatchNormDims& b, cudaStream_t stream) {
        return kernels::batchNormGradInput(i[0], i[1], i[2], i[3], i[4], i[5], i[6], o[0], d,
                                           b.count, stream);
      });
}

}  // namespace

DTC_CUDA_BINDER(conv2d, bindConv<ConvOp::kForward>)
DTC_CUDA_BINDER(conv2d_grad_input, bindConv<ConvOp::kGradInput>)
DTC_CUDA_BINDER(conv2d_grad_weight, bindConv<ConvOp::kGradWeight>)
DTC_CUDA_BINDER(max_pool2d, bindMaxPool2d)
DTC_CUDA_BINDER(max_pool2d_grad, bindMaxPool2dGrad)
DTC_CUDA_BINDER(batch_norm_train, bindBatchNormTrain)
DTC_CUDA_BINDER(batch_norm_train_grad, bindBatchNormTrainGrad)
DTC_CUDA_BINDER(batch_norm_eval, bindBatchNormEval)
DTC_CUDA_BINDER(batch_norm_sum, bindBatchNormSum)
DTC_CUDA_BINDER(batch_norm_centered_squares, bindBatchNormCenteredSquares)
DTC_CUDA_BINDER(batch_norm_normalize, bindBatchNormNormalize)
DTC_CUDA_BINDER(batch_norm_grad_sums, bindBatchNormGradSums)
DTC_CUDA_BINDER(batch_norm_grad_input, bindBatchNormGradInput)

}  // namespace dtc::cuda
