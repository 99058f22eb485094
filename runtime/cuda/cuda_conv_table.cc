// The ConvNet's ops on CUDA (exec/cpu_conv_table.cc's contracts): conv2d and its gradients as
// im2col + batched cuBLAS GEMMs over the samples, max pooling, and BatchNorm (fused and
// synchronised forms).
#include "cuda_bind.h"
#include "gemm.h"

namespace dtc::cuda {
namespace {

using kernels::ConvDims;
using kernels::NormDims;
using kernels::PoolDims;

// Geometry of a conv2d from its input, weight and attributes, checked against `y`'s shape.
StatusOr<ConvDims> convGeometry(const StepContext& ctx, const Shape& x, const Shape& w, const Shape& y) {
  std::vector<int64_t> stride = ctx.intsAttr("stride"), padding = ctx.intsAttr("padding");
  if (x.size() != 4 || w.size() != 4 || y.size() != 4 || stride.size() != 2 || padding.size() != 2 ||
      stride[0] <= 0 || stride[1] <= 0 || padding[0] < 0 || padding[1] < 0 || w[1] != x[1] ||
      x[2] + 2 * padding[0] < w[2] || x[3] + 2 * padding[1] < w[3])
    return invalid(ctx, "bad shapes or attributes for input " + str(x) + " and weight " + str(w));
  ConvDims g{x[0], x[1], x[2], x[3], w[0], w[2], w[3], stride[0], stride[1], padding[0], padding[1], 0, 0};
  g.oh = (g.h + 2 * g.ph - g.kh) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.kw) / g.sw + 1;
  if (y != Shape{g.n, g.o, g.oh, g.ow}) return invalid(ctx, "output " + str(y) + " does not match input " + str(x));
  return g;
}

enum class Conv { kForward, kGradInput, kGradWeight };

// Operands: conv2d (x, w) -> y; conv2d_grad_input (dy, w) -> dx; conv2d_grad_weight (dy, x) -> dw.
template <Conv Kind>
StatusOr<BoundStep> bindConv(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  const TensorView &in0 = ctx.inputs[0], &in1 = ctx.inputs[1], &out = ctx.outputs[0];
  const Shape& x = Kind == Conv::kForward ? in0.shape : Kind == Conv::kGradInput ? out.shape : in1.shape;
  const Shape& w = Kind == Conv::kGradWeight ? out.shape : in1.shape;
  const Shape& y = Kind == Conv::kForward ? out.shape : in0.shape;
  DTC_ASSIGN_OR_RETURN(ConvDims g, convGeometry(ctx, x, w, y));
  const int64_t k = g.c * g.kh * g.kw, p = g.oh * g.ow;
  const std::string where = ctx.where();
  GemmShape shape;
  if (Kind == Conv::kForward)  // y[s] [O, p] = w [O, k] · col[s] [k, p]
    shape = {g.o, p, k, false, false, g.n, 0, k * p, g.o * p};
  else if (Kind == Conv::kGradInput)  // col[s] [k, p] = wᵀ [k, O] · dy[s] [O, p]
    shape = {k, p, g.o, true, false, g.n, 0, g.o * p, k * p};
  else  // part[s] [O, k] = dy[s] [O, p] · col[s]ᵀ [p, k]
    shape = {g.o, k, p, false, true, g.n, g.o * p, k * p, g.o * k};
  DTC_RETURN_IF_ERROR(checkGemm(shape, where));
  DTC_ASSIGN_OR_RETURN(void* col, dev.scratch(static_cast<uint64_t>(g.n * k * p) * sizeof(float)));
  float* parts = nullptr;
  if (Kind == Conv::kGradWeight) {
    DTC_ASSIGN_OR_RETURN(void* scratch, dev.scratch(static_cast<uint64_t>(g.n * g.o * k) * sizeof(float)));
    parts = static_cast<float*>(scratch);
  }
  const float *a = in0.f32(), *b = in1.f32();
  float* o = out.f32();
  float* c = static_cast<float*>(col);
  cudaStream_t stream = dev.stream();
  cublasHandle_t handle = dev.blas();
  const bool tf32 = dev.tf32();
  return BoundStep([=]() -> Status {
    if (Kind == Conv::kForward) {
      DTC_RETURN_IF_ERROR(launched(kernels::im2col(a, c, g, stream), where));
      return gemm(handle, tf32, b, c, o, shape, where);
    }
    if (Kind == Conv::kGradInput) {
      DTC_RETURN_IF_ERROR(gemm(handle, tf32, b, a, c, shape, where));
      return launched(kernels::col2im(c, o, g, stream), where);
    }
    // Per-sample weight gradients, then their sum over the batch (in double: deterministic).
    DTC_RETURN_IF_ERROR(launched(kernels::im2col(b, c, g, stream), where));
    DTC_RETURN_IF_ERROR(gemm(handle, tf32, a, c, parts, shape, where));
    return launched(kernels::sumBatches(parts, g.n, g.o * k, o, stream), where);
  });
}

StatusOr<PoolDims> poolGeometry(const StepContext& ctx, const Shape& x, const Shape& y) {
  std::vector<int64_t> kernel = ctx.intsAttr("kernel"), stride = ctx.intsAttr("stride");
  if (x.size() != 4 || kernel.size() != 2 || stride.size() != 2 || kernel[0] <= 0 || kernel[1] <= 0 ||
      stride[0] <= 0 || stride[1] <= 0 || x[2] < kernel[0] || x[3] < kernel[1])
    return invalid(ctx, "bad shape or attributes for input " + str(x));
  PoolDims g{x[0], x[1], x[2], x[3], kernel[0], kernel[1], stride[0], stride[1], 0, 0};
  g.oh = (g.h - g.kh) / g.sh + 1;
  g.ow = (g.w - g.kw) / g.sw + 1;
  if (y != Shape{g.n, g.c, g.oh, g.ow}) return invalid(ctx, "output " + str(y) + " does not match input " + str(x));
  return g;
}

StatusOr<BoundStep> bindMaxPool2d(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(PoolDims g, poolGeometry(ctx, x.shape, y.shape));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::maxPool2d(x.f32(), y.f32(), g, stream), where); });
}

StatusOr<BoundStep> bindMaxPool2dGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], dx = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(sameShape(ctx, x, dx));
  DTC_ASSIGN_OR_RETURN(PoolDims g, poolGeometry(ctx, x.shape, dy.shape));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::maxPool2dGrad(dy.f32(), x.f32(), dx.f32(), g, stream), where); });
}

// x [N, C, H, W] with every other operand [C]: checks and returns {N, C, H·W}.
StatusOr<NormDims> normShape(const StepContext& ctx, const TensorView& x,
                             std::initializer_list<const TensorView*> perChannel) {
  if (x.shape.size() != 4) return invalid(ctx, "needs NCHW input, got " + str(x.shape));
  for (const TensorView* t : perChannel)
    if (t->shape != Shape{x.shape[1]})
      return invalid(ctx, "per-channel tensors must be [" + std::to_string(x.shape[1]) + "]");
  return NormDims{x.shape[0], x.shape[1], x.shape[2] * x.shape[3]};
}

// Synchronised BatchNorm pieces: `count` (the whole batch's values per channel) must cover at
// least the local ones.
StatusOr<int64_t> syncCount(const StepContext& ctx, const NormDims& d) {
  int64_t count = ctx.intAttr("count");
  if (count < d.n * d.s)
    return invalid(ctx, "count " + std::to_string(count) + " is below the " + std::to_string(d.n * d.s) +
                            " values per channel it holds");
  return count;
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

StatusOr<BoundStep> bindBatchNormTrain(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 5));
  const auto &in = ctx.inputs, &out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], out[0]));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4], &out[1], &out[2], &out[3], &out[4]}));
  const float eps = static_cast<float>(ctx.floatAttr("eps")), momentum = static_cast<float>(ctx.floatAttr("momentum"));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    const auto& i = p.in;
    const auto& o = p.out;
    return launched(kernels::batchNormTrain(i[0], i[1], i[2], i[3], i[4], o[0], o[1], o[2], o[3], o[4], d, eps,
                                            momentum, stream),
                    where);
  });
}

StatusOr<BoundStep> bindBatchNormTrainGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  const auto &in = ctx.inputs, &out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[1], out[0]));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, in[1], {&in[2], &in[3], &in[4], &out[1], &out[2]}));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    const auto& i = p.in;
    const auto& o = p.out;
    return launched(kernels::batchNormTrainGrad(i[0], i[1], i[2], i[3], i[4], o[0], o[1], o[2], d, stream), where);
  });
}

StatusOr<BoundStep> bindBatchNormEval(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 1));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4]}));
  const float eps = static_cast<float>(ctx.floatAttr("eps"));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    const auto& i = p.in;
    return launched(kernels::batchNormEval(i[0], i[1], i[2], i[3], i[4], p.out[0], d, eps, stream), where);
  });
}

StatusOr<BoundStep> bindBatchNormSum(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, ctx.inputs[0], {&ctx.outputs[0]}));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::batchNormSum(p.in[0], p.out[0], d, stream), where); });
}

StatusOr<BoundStep> bindBatchNormCenteredSquares(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, ctx.inputs[0], {&ctx.inputs[1], &ctx.outputs[0]}));
  DTC_ASSIGN_OR_RETURN(int64_t count, syncCount(ctx, d));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::batchNormCenteredSquares(p.in[0], p.in[1], p.out[0], d, count, stream), where); });
}

StatusOr<BoundStep> bindBatchNormNormalize(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 7, 5));
  const auto &in = ctx.inputs, &out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], out[0]));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4], &in[5], &in[6], &out[1],
                                                          &out[2], &out[3], &out[4]}));
  DTC_ASSIGN_OR_RETURN(int64_t count, syncCount(ctx, d));
  const float eps = static_cast<float>(ctx.floatAttr("eps")), momentum = static_cast<float>(ctx.floatAttr("momentum"));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    const auto& i = p.in;
    const auto& o = p.out;
    return launched(kernels::batchNormNormalize(i[0], i[1], i[2], i[3], i[4], i[5], i[6], o[0], o[1], o[2], o[3],
                                                o[4], d, count, eps, momentum, stream),
                    where);
  });
}

StatusOr<BoundStep> bindBatchNormGradSums(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 2));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, in[1], {&in[2], &in[3], &ctx.outputs[0], &ctx.outputs[1]}));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    const auto& i = p.in;
    const auto& o = p.out;
    return launched(kernels::batchNormGradSums(i[0], i[1], i[2], i[3], o[0], o[1], d, stream), where);
  });
}

StatusOr<BoundStep> bindBatchNormGradInput(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 7, 1));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[1], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(NormDims d, normShape(ctx, in[1], {&in[2], &in[3], &in[4], &in[5], &in[6]}));
  DTC_ASSIGN_OR_RETURN(int64_t count, syncCount(ctx, d));
  const Operands p(ctx);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    const auto& i = p.in;
    return launched(kernels::batchNormGradInput(i[0], i[1], i[2], i[3], i[4], i[5], i[6], p.out[0], d, count, stream),
                    where);
  });
}

}  // namespace

const CudaBinderTable& convCudaBinders() {
  static const CudaBinderTable table = {
      {"conv2d", bindConv<Conv::kForward>},
      {"conv2d_grad_input", bindConv<Conv::kGradInput>},
      {"conv2d_grad_weight", bindConv<Conv::kGradWeight>},
      {"max_pool2d", bindMaxPool2d},
      {"max_pool2d_grad", bindMaxPool2dGrad},
      {"batch_norm_train", bindBatchNormTrain},
      {"batch_norm_train_grad", bindBatchNormTrainGrad},
      {"batch_norm_eval", bindBatchNormEval},
      {"batch_norm_sum", bindBatchNormSum},
      {"batch_norm_centered_squares", bindBatchNormCenteredSquares},
      {"batch_norm_normalize", bindBatchNormNormalize},
      {"batch_norm_grad_sums", bindBatchNormGradSums},
      {"batch_norm_grad_input", bindBatchNormGradInput},
  };
  return table;
}

}  // namespace dtc::cuda
