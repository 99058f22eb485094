// Kernel contracts and bindings of the convolutional ops (see cpu/conv_kernels.h).
#include "cpu/conv_kernels.h"
#include "exec/bind_util.h"

namespace dtc {
namespace {

// Geometry of a conv2d from its input, weight and attributes, checked against `y`'s shape.
StatusOr<cpu::ConvGeometry> convGeometry(const StepContext& ctx, const Shape& x, const Shape& w,
                                         const Shape& y) {
  std::vector<int64_t> stride = ctx.intsAttr("stride"), padding = ctx.intsAttr("padding");
  if (x.size() != 4 || w.size() != 4 || y.size() != 4 || stride.size() != 2 ||
      padding.size() != 2 || stride[0] <= 0 || stride[1] <= 0 || padding[0] < 0 ||
      padding[1] < 0 || w[1] != x[1] || x[2] + 2 * padding[0] < w[2] ||
      x[3] + 2 * padding[1] < w[3])
    return invalid(ctx, "bad shapes or attributes for input " + str(x) + " and weight " + str(w));
  cpu::ConvGeometry g{x[0], x[1], x[2], x[3], w[0], w[2], w[3],
                      stride[0], stride[1], padding[0], padding[1]};
  if (y != Shape{g.n, g.o, g.oh(), g.ow()})
    return invalid(ctx, "output " + str(y) + " does not match input " + str(x));
  return g;
}

// The three conv kernels share one form, kernel(in0, in1, out0, geometry); they differ in which
// operand plays the input x, the weight and the output y: 0 = inputs[0], 1 = inputs[1],
// 2 = outputs[0].
using ConvKernel = void (*)(const float*, const float*, float*, const cpu::ConvGeometry&,
                            ThreadPool&);

template <ConvKernel Kernel, int X, int W, int Y>
StatusOr<BoundStep> bindConv(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  const TensorView operands[3] = {ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]};
  DTC_ASSIGN_OR_RETURN(cpu::ConvGeometry g, convGeometry(ctx, operands[X].shape,
                                                         operands[W].shape, operands[Y].shape));
  float *a = operands[0].f32(), *b = operands[1].f32(), *out = operands[2].f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    Kernel(a, b, out, g, *pool);
    return Status::Ok();
  });
}

StatusOr<cpu::PoolGeometry> poolGeometry(const StepContext& ctx, const Shape& x, const Shape& y) {
  std::vector<int64_t> kernel = ctx.intsAttr("kernel"), stride = ctx.intsAttr("stride");
  if (x.size() != 4 || kernel.size() != 2 || stride.size() != 2 || kernel[0] <= 0 ||
      kernel[1] <= 0 || stride[0] <= 0 || stride[1] <= 0 || x[2] < kernel[0] || x[3] < kernel[1])
    return invalid(ctx, "bad shape or attributes for input " + str(x));
  cpu::PoolGeometry g{x[0], x[1], x[2], x[3], kernel[0], kernel[1], stride[0], stride[1]};
  if (y != Shape{g.n, g.c, g.oh(), g.ow()})
    return invalid(ctx, "output " + str(y) + " does not match input " + str(x));
  return g;
}

StatusOr<BoundStep> bindMaxPool2d(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(cpu::PoolGeometry g, poolGeometry(ctx, x.shape, y.shape));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::maxPool2d(x.f32(), y.f32(), g, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMaxPool2dGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], dx = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(sameShape(ctx, x, dx));
  DTC_ASSIGN_OR_RETURN(cpu::PoolGeometry g, poolGeometry(ctx, x.shape, dy.shape));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::maxPool2dGrad(dy.f32(), x.f32(), dx.f32(), g, *pool);
    return Status::Ok();
  });
}

// x [N, C, H, W] with every other operand [C]: checks and returns {N, C, H·W}.
StatusOr<std::array<int64_t, 3>> normShape(const StepContext& ctx, const TensorView& x,
                                           std::initializer_list<const TensorView*> perChannel) {
  if (x.shape.size() != 4) return invalid(ctx, "needs NCHW input, got " + str(x.shape));
  for (const TensorView* t : perChannel)
    if (t->shape != Shape{x.shape[1]})
      return invalid(ctx, "per-channel tensors must be [" + std::to_string(x.shape[1]) + "]");
  return std::array<int64_t, 3>{x.shape[0], x.shape[1], x.shape[2] * x.shape[3]};
}

StatusOr<BoundStep> bindBatchNormTrain(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 5));
  const auto& in = ctx.inputs;
  const auto& out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], out[0]));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4], &out[1],
                                                         &out[2], &out[3], &out[4]}));
  float eps = static_cast<float>(ctx.floatAttr("eps"));
  float momentum = static_cast<float>(ctx.floatAttr("momentum"));
  std::vector<TensorView> i = in, o = out;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormTrain(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), o[0].f32(),
                        o[1].f32(), o[2].f32(), o[3].f32(), o[4].f32(), dims[0], dims[1], dims[2],
                        eps, momentum, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormTrainGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  const auto& in = ctx.inputs;
  const auto& out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[1], out[0]));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, in[1], {&in[2], &in[3], &in[4], &out[1], &out[2]}));
  std::vector<TensorView> i = in, o = out;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormTrainGrad(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), o[0].f32(),
                            o[1].f32(), o[2].f32(), dims[0], dims[1], dims[2], *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormEval(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 1));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4]}));
  float eps = static_cast<float>(ctx.floatAttr("eps"));
  std::vector<TensorView> i = in;
  TensorView y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormEval(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), y.f32(),
                       dims[0], dims[1], dims[2], eps, *pool);
    return Status::Ok();
  });
}

// Synchronised BatchNorm pieces: `count` (the whole batch's values per channel) must cover at
// least the local ones.
StatusOr<int64_t> syncCount(const StepContext& ctx, const std::array<int64_t, 3>& dims) {
  int64_t count = ctx.intAttr("count");
  if (count < dims[0] * dims[2])
    return invalid(ctx, "count " + std::to_string(count) + " is below the " +
                            std::to_string(dims[0] * dims[2]) + " values per channel it holds");
  return count;
}

StatusOr<BoundStep> bindBatchNormSum(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, ctx.inputs[0], {&ctx.outputs[0]}));
  TensorView x = ctx.inputs[0], sum = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormSum(x.f32(), sum.f32(), dims[0], dims[1], dims[2], *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormCenteredSquares(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, ctx.inputs[0], {&ctx.inputs[1], &ctx.outputs[0]}));
  DTC_ASSIGN_OR_RETURN(int64_t count, syncCount(ctx, dims));
  TensorView x = ctx.inputs[0], sum = ctx.inputs[1], sq = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormCenteredSquares(x.f32(), sum.f32(), sq.f32(), dims[0], dims[1], dims[2], count,
                                  *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormNormalize(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 7, 5));
  const auto& in = ctx.inputs;
  const auto& out = ctx.outputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], out[0]));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, in[0], {&in[1], &in[2], &in[3], &in[4], &in[5],
                                                         &in[6], &out[1], &out[2], &out[3], &out[4]}));
  DTC_ASSIGN_OR_RETURN(int64_t count, syncCount(ctx, dims));
  float eps = static_cast<float>(ctx.floatAttr("eps"));
  float momentum = static_cast<float>(ctx.floatAttr("momentum"));
  std::vector<TensorView> i = in, o = out;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormNormalize(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), i[5].f32(),
                            i[6].f32(), o[0].f32(), o[1].f32(), o[2].f32(), o[3].f32(), o[4].f32(),
                            dims[0], dims[1], dims[2], count, eps, momentum, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormGradSums(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 2));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, in[1], {&in[2], &in[3], &ctx.outputs[0],
                                                         &ctx.outputs[1]}));
  std::vector<TensorView> i = in, o = ctx.outputs;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormGradSums(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), o[0].f32(), o[1].f32(),
                           dims[0], dims[1], dims[2], *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBatchNormGradInput(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 7, 1));
  const auto& in = ctx.inputs;
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[0], in[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, in[1], ctx.outputs[0]));
  DTC_ASSIGN_OR_RETURN(auto dims, normShape(ctx, in[1], {&in[2], &in[3], &in[4], &in[5], &in[6]}));
  DTC_ASSIGN_OR_RETURN(int64_t count, syncCount(ctx, dims));
  std::vector<TensorView> i = in;
  TensorView dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchNormGradInput(i[0].f32(), i[1].f32(), i[2].f32(), i[3].f32(), i[4].f32(), i[5].f32(),
                            i[6].f32(), dx.f32(), dims[0], dims[1], dims[2], count, *pool);
    return Status::Ok();
  });
}

}  // namespace

const BinderTable& convBinders() {
  static const BinderTable table = {
      {"conv2d", bindConv<cpu::conv2d, 0, 1, 2>},                        // (x, w) -> y
      {"conv2d_grad_input", bindConv<cpu::conv2dGradInput, 2, 1, 0>},    // (dy, w) -> dx
      {"conv2d_grad_weight", bindConv<cpu::conv2dGradWeight, 1, 2, 0>},  // (dy, x) -> dw
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

}  // namespace dtc
