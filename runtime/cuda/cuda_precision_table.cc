// Mixed precision and loss scaling on CUDA: casts (cpu/cpu_precision_table.cc's bindCast), the
// widened form of a float32 binder for 16-bit operands (its bindLowPrecision), and the loss
// scale's steps (cpu/cpu_precision_table.cc), with the CPU's contracts
// (exec/precision_contracts.h).
#include "cuda_bind.h"
#include "exec/precision_contracts.h"

namespace dtc::cuda {
namespace {

using kernels::Float;

// y = x in y's element type (f32, bf16, f16).
StatusOr<BoundStep> bindCast(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkCast(ctx));
  const TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  const int64_t n = x.numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  if (x.dtype == DType::kI64) {  // a mask the data holds, to float32 (checkCast)
    const int64_t* from = reinterpret_cast<const int64_t*>(x.data);
    float* into = y.f32();
    return BoundStep([=] { return launched(kernels::int64ToF32(from, into, n, stream), where); });
  }
  const Float from = floatOf(x.dtype), to = floatOf(y.dtype);
  const uint64_t inBytes = n * dtypeSize(x.dtype), outBytes = n * dtypeSize(y.dtype);
  // Storage that partly overlaps (the CPU's sequential loop copes; parallel threads would read
  // what others already wrote) goes through a scratch copy of the input, as reshape does.
  const bool same = x.data == y.data && x.dtype == y.dtype;
  const bool overlap = !same && n > 0 && x.data < y.data + outBytes && y.data < x.data + inBytes;
  uint8_t* copy = nullptr;
  if (overlap) {
    DTC_ASSIGN_OR_RETURN(void* scratch, dev.scratch(inBytes));
    copy = static_cast<uint8_t*>(scratch);
  }
  return BoundStep([=] {
    const uint8_t* source = x.data;
    if (copy) {
      DTC_RETURN_IF_ERROR(
          cudaStatus(cudaMemcpyAsync(copy, x.data, inBytes, cudaMemcpyDeviceToDevice, stream),
                     where + "a copy"));
      source = copy;
    }
    return launched(kernels::cast(source, from, y.data, to, n, stream), where);
  });
}

// Every pair as bindCast casts it, in one launch for up to 128 pairs.
StatusOr<BoundStep> bindMultiTensorCast(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkMultiTensorCast(ctx));
  std::vector<kernels::CastPair> pairs;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    pairs.push_back({ctx.inputs[i].data, ctx.outputs[i].data, ctx.inputs[i].numElements()});
  const Float from = floatOf(ctx.inputs[0].dtype), to = floatOf(ctx.outputs[0].dtype);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::multiTensorCast(pairs, from, to, stream), where); });
}

StatusOr<BoundStep> bindNonfiniteCount(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkNonfiniteCount(ctx));
  DTC_ASSIGN_OR_RETURN(void* partial,
                       stepScratch(ctx, dev, kernels::kSumBlocks * sizeof(long long)));
  const float* x = ctx.inputs[0].f32();
  float* count = ctx.outputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  auto* partials = static_cast<long long*>(partial);
  return BoundStep(
      [=] { return launched(kernels::nonfiniteCount(x, n, count, partials, stream), where); });
}

StatusOr<BoundStep> bindSumSquares(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkSumSquares(ctx));
  DTC_ASSIGN_OR_RETURN(void* partial, stepScratch(ctx, dev, kernels::kSumBlocks * sizeof(double)));
  const float* x = ctx.inputs[0].f32();
  float* sum = ctx.outputs[0].f32();
  const int64_t n = ctx.inputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  auto* partials = static_cast<double*>(partial);
  return BoundStep(
      [=] { return launched(kernels::sumSquares(x, n, sum, partials, stream), where); });
}

StatusOr<BoundStep> bindClipCoefficient(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const float maxNorm, checkClipCoefficient(ctx));
  const float* squares = ctx.inputs[0].f32();
  float *norm = ctx.outputs[0].f32(), *coef = ctx.outputs[1].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::clipCoefficient(squares, norm, coef, maxNorm, stream), where);
  });
}

StatusOr<BoundStep> bindLossScaleStep(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(LossScaleRule rule, checkLossScaleStep(ctx));
  const float growth = rule.growth, backoff = rule.backoff;
  const float intervalF =
      static_cast<float>(rule.growthInterval);  // the CPU compares with this float
  const float *scale = ctx.inputs[0].f32(), *good = ctx.inputs[1].f32(),
              *nonfinite = ctx.inputs[2].f32();
  float *keep = ctx.outputs[0].f32(), *inv = ctx.outputs[1].f32(), *newScale = ctx.outputs[2].f32(),
        *newGood = ctx.outputs[3].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::lossScaleStep(scale, good, nonfinite, keep, inv, newScale, newGood,
                                           intervalF, growth, backoff, stream),
                    where);
  });
}

StatusOr<BoundStep> bindSelect(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(checkSelect(ctx));
  // Values are whole buffers: y is on_true, on_false or neither, never a part of one.
  const float *pred = ctx.inputs[0].f32(), *onTrue = ctx.inputs[1].f32(),
              *onFalse = ctx.inputs[2].f32();
  float* y = ctx.outputs[0].f32();
  const int64_t n = ctx.outputs[0].numElements();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::select(pred, onTrue, onFalse, y, n, stream), where); });
}

}  // namespace

StatusOr<BoundStep> bindWidened(const StepContext& ctx, Device& dev, CudaBinder wide) {
  const DType low = ctx.inputs.empty() ? ctx.outputs[0].dtype : ctx.inputs[0].dtype;
  uint64_t floats = 0;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list) {
      if (t.dtype != low)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low) +
                                " and " + dtypeName(t.dtype));
      floats += t.numElements();
    }
  // The widened copies open the step's scratch (ops/step_scratch.h, widenedCollectiveBytes), the
  // float32 form's own scratch follows them. Unplanned, they live in shared scratch: they are
  // dead once the step's last kernel (the rounding back) has run.
  const uint64_t wideBytes = kernels::alignPiece(floats * sizeof(float));
  StepContext f32{ctx.step, ctx.inputs, ctx.outputs, ctx.pool, ctx.mesh};
  uint8_t* base = nullptr;
  if (ctx.scratch && ctx.scratchBytes >= wideBytes) {
    base = ctx.scratch;
    f32.scratch = ctx.scratch + wideBytes;
    f32.scratchBytes = ctx.scratchBytes - wideBytes;
  } else {
    DTC_ASSIGN_OR_RETURN(base, stepScratch(ctx, dev, wideBytes, 0));
  }
  float* at = reinterpret_cast<float*>(base);
  for (auto* list : {&f32.inputs, &f32.outputs})
    for (TensorView& t : *list) {
      t.data = reinterpret_cast<uint8_t*>(at);
      t.dtype = DType::kF32;
      at += t.numElements();
    }
  DTC_ASSIGN_OR_RETURN(BoundStep inner, wide(f32, dev));
  const std::vector<TensorView> lowIn = ctx.inputs, lowOut = ctx.outputs;
  const std::vector<TensorView> wideIn = f32.inputs, wideOut = f32.outputs;
  const Float type = floatOf(low);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    for (size_t i = 0; i < lowIn.size(); ++i)
      DTC_RETURN_IF_ERROR(launched(kernels::cast(lowIn[i].data, type, wideIn[i].data, Float::kF32,
                                                 lowIn[i].numElements(), stream),
                                   where));
    DTC_RETURN_IF_ERROR(inner());
    for (size_t i = 0; i < lowOut.size(); ++i)
      DTC_RETURN_IF_ERROR(launched(kernels::cast(wideOut[i].data, Float::kF32, lowOut[i].data, type,
                                                 lowOut[i].numElements(), stream),
                                   where));
    return Status::Ok();
  });
}

DTC_CUDA_BINDER(cast, bindCast)
DTC_CUDA_BINDER(multi_tensor_cast, bindMultiTensorCast)
DTC_CUDA_BINDER(nonfinite_count, bindNonfiniteCount)
DTC_CUDA_BINDER(loss_scale_step, bindLossScaleStep)
DTC_CUDA_BINDER(select, bindSelect)
DTC_CUDA_BINDER(sum_squares, bindSumSquares)
DTC_CUDA_BINDER(clip_coefficient, bindClipCoefficient)

}  // namespace dtc::cuda
