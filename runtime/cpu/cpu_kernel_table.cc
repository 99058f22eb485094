// The CPU backend's kernel table: for each plan op, the contract its operands must meet and the
// call into runtime/cpu. Contracts are checked once, when the plan is bound, so a corrupt or
// mismatched plan is an error before any kernel touches memory.
#include <algorithm>
#include <cstring>
#include <memory>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "exec/core_contracts.h"
#include "exec/dropout_contract.h"
#include "exec/loss_contracts.h"
#include "exec/precision_contracts.h"
#include "ops/step_scratch.h"
#include "support/half.h"

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

void toF32(const TensorView& from, float* to) {
  const auto* h = reinterpret_cast<const uint16_t*>(from.data);
  const int64_t n = from.numElements();
  if (from.dtype == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) to[i] = bf16ToF32(h[i]);
  else if (from.dtype == DType::kF16)
    for (int64_t i = 0; i < n; ++i) to[i] = f16ToF32(h[i]);
  else
    std::memcpy(to, from.data, n * sizeof(float));
}

void fromF32(const float* from, const TensorView& to) {
  auto* h = reinterpret_cast<uint16_t*>(to.data);
  const int64_t n = to.numElements();
  if (to.dtype == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) h[i] = f32ToBf16(from[i]);
  else if (to.dtype == DType::kF16)
    for (int64_t i = 0; i < n; ++i) h[i] = f32ToF16(from[i]);
  else
    std::memcpy(to.data, from, n * sizeof(float));
}

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
