// Losses and optimizer updates on CUDA (the rest of exec/cpu_kernel_table.cc's ops). Scalars the
// CPU reads on the host (dloss, AdamW's step counter) are read by the kernels on the device; a
// label outside the classes raises an error flag, reported at the next synchronisation.
#include "cuda_bind.h"

namespace dtc::cuda {
namespace {

Status checkCrossEntropy(const StepContext& ctx, const TensorView& logits, const TensorView& labels) {
  if (logits.shape.size() != 2 || labels.shape != Shape{logits.shape[0]})
    return invalid(ctx, "needs logits [N,C] and labels [N], got " + str(logits.shape) + " and " +
                            str(labels.shape));
  return Status::Ok();
}

// A mean loss's divisor: the `count` attribute (the global rows or elements of a partitioned
// or accumulated batch), at least the local ones; 0 when absent (the kernel's own count).
StatusOr<int64_t> lossDivisor(const StepContext& ctx, int64_t local) {
  int64_t count = ctx.intAttr("count");
  if (count != 0 && count < local)
    return invalid(ctx, "count " + std::to_string(count) + " is below the " + std::to_string(local) +
                            " elements it averages");
  return count;
}

StatusOr<BoundStep> bindCrossEntropy(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkCrossEntropy(ctx, logits, labels));
  if (loss.numElements() != 1) return invalid(ctx, "loss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, logits.shape[0]));
  const int64_t rows = logits.shape[0], classes = logits.shape[1];
  DTC_ASSIGN_OR_RETURN(void* rowLoss, dev.scratch(rows * sizeof(double)));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, "a label is outside [0, " + std::to_string(classes) +
                                                             ") (the data's class labels do not fit the model)"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::softmaxCrossEntropy(logits.f32(), labels.i64(), rows, classes, divisor, loss.f32(),
                                                 static_cast<double*>(rowLoss), bad, stream),
                    where);
  });
}

StatusOr<BoundStep> bindCrossEntropyGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1, {2}));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView dlogits = ctx.outputs[0];
  DTC_RETURN_IF_ERROR(checkCrossEntropy(ctx, logits, labels));
  DTC_RETURN_IF_ERROR(sameShape(ctx, logits, dlogits));
  if (dloss.numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, logits.shape[0]));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::softmaxCrossEntropyGrad(dloss.f32(), logits.f32(), labels.i64(), logits.shape[0],
                                                     logits.shape[1], divisor, dlogits.f32(), stream),
                    where);
  });
}

StatusOr<BoundStep> bindMse(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  if (ctx.outputs[0].numElements() != 1) return invalid(ctx, "loss must be a scalar");
  TensorView pred = ctx.inputs[0], target = ctx.inputs[1], loss = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, pred.numElements()));
  DTC_ASSIGN_OR_RETURN(void* partial, dev.scratch(kernels::kSumBlocks * sizeof(double)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::mse(pred.f32(), target.f32(), pred.numElements(), divisor, loss.f32(),
                                 static_cast<double*>(partial), stream),
                    where);
  });
}

StatusOr<BoundStep> bindMseGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.inputs[2]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
  if (ctx.inputs[0].numElements() != 1) return invalid(ctx, "dloss must be a scalar");
  TensorView dloss = ctx.inputs[0], pred = ctx.inputs[1], target = ctx.inputs[2];
  TensorView dpred = ctx.outputs[0];
  DTC_ASSIGN_OR_RETURN(int64_t divisor, lossDivisor(ctx, pred.numElements()));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::mseGrad(dloss.f32(), pred.f32(), target.f32(), pred.numElements(), divisor,
                                     dpred.f32(), stream),
                    where);
  });
}

StatusOr<BoundStep> bindSgd(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2));
  for (const TensorView& t : {ctx.inputs[1], ctx.inputs[2], ctx.outputs[0], ctx.outputs[1]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], t));
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], buf = ctx.inputs[2];
  TensorView pOut = ctx.outputs[0], bufOut = ctx.outputs[1];
  float lr = ctx.floatAttr("lr"), momentum = ctx.floatAttr("momentum");
  float wd = ctx.floatAttr("weight_decay");
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::sgd(p.f32(), g.f32(), buf.f32(), pOut.f32(), bufOut.f32(), p.numElements(), lr,
                                 momentum, wd, stream),
                    where);
  });
}

StatusOr<BoundStep> bindAdamw(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  for (const TensorView& t : {ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.outputs[0],
                              ctx.outputs[1], ctx.outputs[2]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], t));
  if (ctx.inputs[4].numElements() != 1) return invalid(ctx, "step must be a scalar");
  TensorView p = ctx.inputs[0], g = ctx.inputs[1], m = ctx.inputs[2], v = ctx.inputs[3];
  TensorView step = ctx.inputs[4];
  TensorView pOut = ctx.outputs[0], mOut = ctx.outputs[1], vOut = ctx.outputs[2];
  float lr = ctx.floatAttr("lr"), b1 = ctx.floatAttr("beta1"), b2 = ctx.floatAttr("beta2");
  float eps = ctx.floatAttr("eps"), wd = ctx.floatAttr("weight_decay");
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::adamw(p.f32(), g.f32(), m.f32(), v.f32(), pOut.f32(), mOut.f32(), vOut.f32(),
                                   p.numElements(), step.f32(), lr, b1, b2, eps, wd, stream),
                    where);
  });
}

}  // namespace

const CudaBinderTable& lossCudaBinders() {
  static const CudaBinderTable table = {
      {"softmax_cross_entropy", bindCrossEntropy},
      {"softmax_cross_entropy_grad", bindCrossEntropyGrad},
      {"mse", bindMse},
      {"mse_grad", bindMseGrad},
      {"sgd_update", bindSgd},
      {"adamw_update", bindAdamw},
  };
  return table;
}

}  // namespace dtc::cuda
