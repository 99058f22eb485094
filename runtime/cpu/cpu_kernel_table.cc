// The CPU backend's kernel table: for each plan op, the contract its operands must meet and the
// call into runtime/cpu. Contracts are checked once, when the plan is bound, so a corrupt or
// mismatched plan is an error before any kernel touches memory.
#include <algorithm>
#include <cstring>
#include <memory>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/half.h"
#include "cpu/kernels/kernels.h"
#include "exec/core_contracts.h"
#include "exec/dropout_contract.h"
#include "exec/loss_contracts.h"
#include "exec/precision_contracts.h"
#include "ops/step_scratch.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindGemm(const StepContext& ctx, const GemmDims& g) {
  float *pa = ctx.inputs[0].f32(), *pb = ctx.inputs[1].f32(), *pc = ctx.outputs[0].f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::matmul(pa, pb, pc, g.m, g.n, g.k, g.transA, g.transB, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMatmul(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(GemmDims g, checkMatmul(ctx));
  return bindGemm(ctx, g);
}

template <LinearKind Kind>
StatusOr<BoundStep> bindLinear(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(GemmDims g, checkLinear(ctx, Kind));
  return bindGemm(ctx, g);
}

template <cpu::BinaryOp Op>
StatusOr<BoundStep> bindBinary(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkBinary(ctx));
  TensorView a = ctx.inputs[0], b = ctx.inputs[1], out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::binary(Op, a.f32(), a.shape, b.f32(), b.shape, out.f32(), out.shape, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindReduceSum(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, checkReduceSum(ctx));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::reduceSum(x.f32(), x.shape, axes, out.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindBroadcast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkBroadcast(ctx));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  // x + 0 through the broadcasting kernel: one code path for every broadcast pattern.
  return BoundStep([=] {
    static const float zero = 0.0f;
    cpu::binary(cpu::BinaryOp::kAdd, x.f32(), x.shape, &zero, {}, out.f32(), out.shape, *pool);
    return Status::Ok();
  });
}

// Any element type: labels are reshaped too.
StatusOr<BoundStep> bindReshape(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(size_t bytes, checkReshape(ctx));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  return BoundStep([=] {
    if (out.data != x.data) std::memmove(out.data, x.data, bytes);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindFill(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(float value, checkFill(ctx));
  TensorView out = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::fill(out.f32(), out.numElements(), value, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindGelu(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkUnary(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  bool tanhForm = geluTanh(ctx);
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::gelu(x.f32(), y.f32(), x.numElements(), tanhForm, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindScale(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkUnary(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  const float factor = static_cast<float>(ctx.floatAttr("factor"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::scale(x.f32(), y.f32(), x.numElements(), factor, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindPow(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkUnary(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  const float exponent = static_cast<float>(ctx.floatAttr("exponent"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::power(x.f32(), y.f32(), x.numElements(), exponent, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindDropout(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(DropoutStep d, checkDropout(ctx));
  const float* x = ctx.inputs[0].f32();
  const int64_t* rng = ctx.inputs[1].i64();
  float* y = ctx.outputs[0].f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::dropoutApply(x, y, d.elements, static_cast<uint64_t>(rng[0]),
                      static_cast<uint64_t>(rng[1]), d.placement, d.key, d.ratio, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindGeluGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkActivationGrad(ctx));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], dx = ctx.outputs[0];
  bool tanhForm = geluTanh(ctx);
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::geluGrad(dy.f32(), x.f32(), dx.f32(), dy.numElements(), tanhForm, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCrossEntropy(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropy(ctx));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    if (!cpu::softmaxCrossEntropy(logits.f32(), labels.i64(), d.rows, d.classes, loss.f32(), *pool,
                                  d.divisor, d.ignored))
      return Status::InvalidInput(where + labelOutsideMessage(d.classes));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCrossEntropyGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropyGrad(ctx));
  TensorView dloss = ctx.inputs[0], logits = ctx.inputs[1], labels = ctx.inputs[2];
  TensorView dlogits = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::softmaxCrossEntropyGrad(dloss.f32(), logits.f32(), labels.i64(), d.rows, d.classes,
                                 dlogits.f32(), *pool, d.divisor, d.ignored);
    return Status::Ok();
  });
}

// The loss as softmax_cross_entropy computes it, then its gradient as softmax_cross_entropy_grad
// does (which takes each row's statistics before writing it, so dlogits may be the logits).
StatusOr<BoundStep> bindCrossEntropyWithGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CrossEntropyDims d, checkCrossEntropyWithGrad(ctx));
  TensorView logits = ctx.inputs[0], labels = ctx.inputs[1], dloss = ctx.inputs[2];
  TensorView loss = ctx.outputs[0], dlogits = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  return BoundStep([=] {
    if (!cpu::softmaxCrossEntropy(logits.f32(), labels.i64(), d.rows, d.classes, loss.f32(), *pool,
                                  d.divisor, d.ignored))
      return Status::InvalidInput(where + labelOutsideMessage(d.classes));
    cpu::softmaxCrossEntropyGrad(dloss.f32(), logits.f32(), labels.i64(), d.rows, d.classes,
                                 dlogits.f32(), *pool, d.divisor, d.ignored);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindNllLoss(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(NllDims d, checkNllLoss(ctx));
  TensorView x = ctx.inputs[0], labels = ctx.inputs[1], loss = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  const cpu::NllShape shape{d.rows, d.classes, d.divisor, d.perRow};
  std::string where = ctx.where();
  return BoundStep([=] {
    if (!cpu::nllLoss(x.f32(), labels.i64(), weight, shape, loss.f32(), d.ignored))
      return Status::InvalidInput(where + labelOutsideMessage(d.classes));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindNllLossGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(NllDims d, checkNllLossGrad(ctx));
  TensorView dloss = ctx.inputs[0], labels = ctx.inputs[2], dx = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  const cpu::NllShape shape{d.rows, d.classes, d.divisor, d.perRow};
  return BoundStep([=] {
    cpu::nllLossGrad(dloss.f32(), labels.i64(), weight, shape, dx.f32(), d.ignored);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindLabelFraction(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LabelFractionDims d, checkLabelFraction(ctx));
  TensorView labels = ctx.inputs[0], out = ctx.outputs[0];
  const float* weight = classWeights(ctx, d.weightInput);
  return BoundStep([=] {
    *out.f32() =
        cpu::labelFraction(labels.i64(), d.labels, weight, d.classes, d.ignored, d.divisor);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMse(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(MseDims d, checkMse(ctx));
  TensorView pred = ctx.inputs[0], target = ctx.inputs[1], loss = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::mse(pred.f32(), target.f32(), d.elements, loss.f32(), *pool, d.divisor);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindMseGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(MseDims d, checkMseGrad(ctx));
  TensorView dloss = ctx.inputs[0], pred = ctx.inputs[1], target = ctx.inputs[2];
  TensorView dpred = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::mseGrad(dloss.f32(), pred.f32(), target.f32(), d.elements, dpred.f32(), *pool, d.divisor);
    return Status::Ok();
  });
}

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

DTC_CPU_BINDER(matmul, bindMatmul)
DTC_CPU_BINDER(linear, bindLinear<LinearKind::kForward>)
DTC_CPU_BINDER(linear_grad_input, bindLinear<LinearKind::kGradInput>)
DTC_CPU_BINDER(linear_grad_weight, bindLinear<LinearKind::kGradWeight>)
DTC_CPU_BINDER(add, bindBinary<cpu::BinaryOp::kAdd>)
DTC_CPU_BINDER(sub, bindBinary<cpu::BinaryOp::kSub>)
DTC_CPU_BINDER(mul, bindBinary<cpu::BinaryOp::kMul>)
DTC_CPU_BINDER(div, bindBinary<cpu::BinaryOp::kDiv>)
DTC_CPU_BINDER(reduce_sum, bindReduceSum)
DTC_CPU_BINDER(broadcast, bindBroadcast)
DTC_CPU_BINDER(reshape, bindReshape)
DTC_CPU_BINDER(fill, bindFill)
DTC_CPU_BINDER(relu, bindUnary<cpu::relu>)
DTC_CPU_BINDER(relu_grad, bindActivationGrad<cpu::reluGrad>)
DTC_CPU_BINDER(tanh, bindUnary<cpu::tanhForward>)
DTC_CPU_BINDER(tanh_grad, bindActivationGrad<cpu::tanhGrad>)
DTC_CPU_BINDER(gelu, bindGelu)
DTC_CPU_BINDER(gelu_grad, bindGeluGrad)
DTC_CPU_BINDER(scale, bindScale)
DTC_CPU_BINDER(pow, bindPow)
DTC_CPU_BINDER(dropout, bindDropout)
DTC_CPU_BINDER(softmax_cross_entropy, bindCrossEntropy)
DTC_CPU_BINDER(softmax_cross_entropy_with_grad, bindCrossEntropyWithGrad)
DTC_CPU_BINDER(softmax_cross_entropy_grad, bindCrossEntropyGrad)
DTC_CPU_BINDER(label_fraction, bindLabelFraction)
DTC_CPU_BINDER(nll_loss, bindNllLoss)
DTC_CPU_BINDER(nll_loss_grad, bindNllLossGrad)
DTC_CPU_BINDER(mse, bindMse)
DTC_CPU_BINDER(mse_grad, bindMseGrad)
DTC_CPU_BINDER(sgd_update, bindSgd)
DTC_CPU_BINDER(adamw_update, bindAdamw)
DTC_CPU_BINDER(multi_tensor_adamw, bindMultiTensorAdamw)

namespace {

void toF32(const TensorView& from, float* to) {
  const auto* h = reinterpret_cast<const uint16_t*>(from.data);
  const int64_t n = from.numElements();
  if (from.dtype == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) to[i] = cpu::bf16ToF32(h[i]);
  else if (from.dtype == DType::kF16)
    for (int64_t i = 0; i < n; ++i) to[i] = cpu::f16ToF32(h[i]);
  else
    std::memcpy(to, from.data, n * sizeof(float));
}

void fromF32(const float* from, const TensorView& to) {
  auto* h = reinterpret_cast<uint16_t*>(to.data);
  const int64_t n = to.numElements();
  if (to.dtype == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) h[i] = cpu::f32ToBf16(from[i]);
  else if (to.dtype == DType::kF16)
    for (int64_t i = 0; i < n; ++i) h[i] = cpu::f32ToF16(from[i]);
  else
    std::memcpy(to.data, from, n * sizeof(float));
}

// y = x in y's element type (f32, bf16, f16).
// y = x in y's element type; between two 16-bit types through f32 (exact).
void castInto(const TensorView& x, const TensorView& y) {
  if (x.dtype == y.dtype) {
    std::memmove(y.data, x.data, x.numElements() * dtypeSize(x.dtype));
  } else if (x.dtype == DType::kF32) {
    fromF32(x.f32(), y);
  } else if (y.dtype == DType::kF32) {
    toF32(x, y.f32());
  } else {
    std::vector<float> wide(x.numElements());
    toF32(x, wide.data());
    fromF32(wide.data(), y);
  }
}

StatusOr<BoundStep> bindCast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkCast(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  return BoundStep([=] {
    castInto(x, y);
    return Status::Ok();
  });
}

// Each pair as cast computes it.
StatusOr<BoundStep> bindMultiTensorCast(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkMultiTensorCast(ctx));
  std::vector<TensorView> xs(ctx.inputs.begin(), ctx.inputs.end());
  std::vector<TensorView> ys(ctx.outputs.begin(), ctx.outputs.end());
  return BoundStep([=] {
    for (size_t i = 0; i < xs.size(); ++i) castInto(xs[i], ys[i]);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(cast, bindCast)
DTC_CPU_BINDER(multi_tensor_cast, bindMultiTensorCast)

// Widening is exact (every bf16/f16 value is a float32): a contraction then accumulates in f32
// and rounds once, as a GPU's tensor cores do. Operands already f32 (attention's log-sum-exp) are
// used as they are; the 16-bit ones must share one type.
// The copies live in the step's planned scratch (ops/step_scratch.h lays them out as the
// compiler sized them); a plan compiled for another device has none, and the step then owns its
// copies, counted as memory beyond the plan.
StepBuffer stepBuffer(const StepContext& ctx, uint64_t bytes) {
  StepBuffer b;
  if (ctx.scratch && ctx.scratchBytes >= bytes) {
    b.data = ctx.scratch;
    return b;
  }
  // Over-allocated by one alignment so that it starts on a boundary as planned scratch does.
  b.owned = std::make_shared<std::vector<uint8_t>>(bytes + kScratchAlign);
  b.data = b.owned->data() +
           (kScratchAlign - reinterpret_cast<uintptr_t>(b.owned->data()) % kScratchAlign) %
               kScratchAlign;
  if (ctx.unplannedBytes) *ctx.unplannedBytes += b.owned->size();
  return b;
}

StatusOr<BoundStep> bindWidened(const StepContext& ctx, Binder wide) {
  DTC_RETURN_IF_ERROR(sharedLowPrecision(ctx).status());
  uint64_t need = 0;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (lowPrecision(t.dtype)) need += widenedCopyBytes(t.numElements());
  const StepBuffer copies = stepBuffer(ctx, need);
  const std::shared_ptr<std::vector<uint8_t>> owned = copies.owned;
  uint8_t* next = copies.data;
  StepContext f32 = ctx;
  for (auto* list : {&f32.inputs, &f32.outputs})
    for (TensorView& t : *list) {
      if (!lowPrecision(t.dtype)) continue;
      t.data = next;
      next += widenedCopyBytes(t.numElements());
      t.dtype = DType::kF32;
    }
  // The copies hold the scratch's start; a collective packs after them.
  f32.scratch = owned || ctx.scratchBytes <= need ? nullptr : ctx.scratch + need;
  f32.scratchBytes = f32.scratch ? ctx.scratchBytes - need : 0;
  DTC_ASSIGN_OR_RETURN(BoundStep inner, wide(f32));
  std::vector<TensorView> lowIn = ctx.inputs, lowOut = ctx.outputs;
  std::vector<TensorView> wideIn = f32.inputs, wideOut = f32.outputs;
  return BoundStep([=] {
    for (size_t i = 0; i < lowIn.size(); ++i)
      if (lowPrecision(lowIn[i].dtype)) toF32(lowIn[i], wideIn[i].f32());
    DTC_RETURN_IF_ERROR(inner());
    for (size_t i = 0; i < lowOut.size(); ++i)
      if (lowPrecision(lowOut[i].dtype)) fromF32(wideOut[i].f32(), lowOut[i]);
    (void)owned;  // the copies, when the plan did not hold them
    return Status::Ok();
  });
}

}  // namespace dtc
