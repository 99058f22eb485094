// RMSNorm over the last dimension, as transformers' LlamaRMSNorm computes it in float32, its
// gradient, the forms with the residual add fused, and their binders (the contracts of
// exec/norm_contracts.h). Row sums are accumulated in double; the weight's gradient is summed over
// rows column by column, so every result is the same for any thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "exec/norm_contracts.h"

namespace dtc {
namespace {

constexpr int64_t kGrainFloats = 8192;
// Columns of the weight gradient per task: each task sums its columns over every row.
constexpr int64_t kColumnsPerTask = 64;

int64_t rowGrain(int64_t c) { return std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(c, 1)); }

// y = x·rstd·w over `rows` rows of C with rstd = 1/sqrt(mean(x²) + eps), written [rows].
void rmsNorm(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t c,
             float eps, ThreadPool& pool) {
  pool.parallelFor(rows, rowGrain(c), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * c;
      double sq = 0;
      for (int64_t j = 0; j < c; ++j) sq += static_cast<double>(in[j]) * in[j];
      const float s = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(c) + eps));
      rstd[r] = s;
      float* out = y + r * c;
      for (int64_t j = 0; j < c; ++j) out[j] = in[j] * s * w[j];
    }
  });
}

// Gradients from the saved rstd: dx [rows, C], dw [C] (overwritten).
void rmsNormGrad(const float* dy, const float* x, const float* w, const float* rstd, float* dx,
                 float* dw, int64_t rows, int64_t c, ThreadPool& pool) {
  // y = x·r·w with r = (mean(x²) + eps)^(-1/2): dx = r·(g − x·r²·mean(g·x)), g = dy·w.
  pool.parallelFor(rows, rowGrain(c), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *g = dy + r * c, *in = x + r * c;
      double dot = 0;
      for (int64_t j = 0; j < c; ++j) dot += static_cast<double>(g[j]) * w[j] * in[j];
      const float s = rstd[r];
      const float k = static_cast<float>(dot / static_cast<double>(c)) * s * s;
      float* out = dx + r * c;
      for (int64_t j = 0; j < c; ++j) out[j] = s * (g[j] * w[j] - in[j] * k);
    }
  });
  const int64_t tasks = (c + kColumnsPerTask - 1) / kColumnsPerTask;
  pool.parallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
    const int64_t from = begin * kColumnsPerTask, to = std::min(c, end * kColumnsPerTask);
    std::vector<double> sum(static_cast<size_t>(to - from), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *g = dy + r * c, *in = x + r * c;
      const double s = rstd[r];
      for (int64_t j = from; j < to; ++j) sum[j - from] += static_cast<double>(g[j]) * in[j] * s;
    }
    for (int64_t j = from; j < to; ++j) dw[j] = static_cast<float>(sum[j - from]);
  });
}

StatusOr<BoundStep> bindRmsNorm(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkRmsNorm(ctx));
  TensorView x = ctx.inputs[0], w = ctx.inputs[1], y = ctx.outputs[0], rstd = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    rmsNorm(x.f32(), w.f32(), y.f32(), rstd.f32(), d.rows, d.c, d.eps, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindRmsNormGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkRmsNormGrad(ctx));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], w = ctx.inputs[2], rstd = ctx.inputs[3];
  TensorView dx = ctx.outputs[0], dw = ctx.outputs[1];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    rmsNormGrad(dy.f32(), x.f32(), w.f32(), rstd.f32(), dx.f32(), dw.f32(), d.rows, d.c, *pool);
    return Status::Ok();
  });
}

// The residual add as add computes it, then rms_norm of the sum: the unfused steps' bits.
StatusOr<BoundStep> bindAddRmsNorm(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkAddRmsNorm(ctx));
  TensorView x = ctx.inputs[0], r = ctx.inputs[1], w = ctx.inputs[2];
  TensorView sum = ctx.outputs[0], y = ctx.outputs[1], rstd = ctx.outputs[2];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::binary(cpu::BinaryOp::kAdd, x.f32(), x.shape, r.f32(), r.shape, sum.f32(), sum.shape,
                *pool);
    rmsNorm(sum.f32(), w.f32(), y.f32(), rstd.f32(), d.rows, d.c, d.eps, *pool);
    return Status::Ok();
  });
}

// The parts of dy summed left to right as the adds they replace summed them, rms_norm_grad into
// the sum's buffer, then the residual gradient added: the unfused steps' bits.
StatusOr<BoundStep> bindRmsNormGradAdd(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkRmsNormGradAdd(ctx));
  const size_t parts = ctx.inputs.size() - 4;
  std::vector<TensorView> dy(ctx.inputs.begin(), ctx.inputs.begin() + parts);
  TensorView x = ctx.inputs[parts], w = ctx.inputs[parts + 1], rstd = ctx.inputs[parts + 2];
  TensorView dres = ctx.inputs[parts + 3];
  TensorView sum = ctx.outputs[0], dw = ctx.outputs[1];
  const bool copy = ctx.outputs.size() == 3;
  TensorView rounded = copy ? ctx.outputs[2] : sum;
  StepBuffer total;
  if (parts > 1) total = stepBuffer(ctx, x.numElements() * sizeof(float));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    const float* g = dy[0].f32();
    if (parts > 1) {
      float* t = reinterpret_cast<float*>(total.data);
      cpu::binary(cpu::BinaryOp::kAdd, dy[0].f32(), x.shape, dy[1].f32(), x.shape, t, x.shape,
                  *pool);
      for (size_t i = 2; i < parts; ++i)
        cpu::binary(cpu::BinaryOp::kAdd, t, x.shape, dy[i].f32(), x.shape, t, x.shape, *pool);
      g = t;
    }
    rmsNormGrad(g, x.f32(), w.f32(), rstd.f32(), sum.f32(), dw.f32(), d.rows, d.c, *pool);
    cpu::binary(cpu::BinaryOp::kAdd, dres.f32(), dres.shape, sum.f32(), sum.shape, sum.f32(),
                sum.shape, *pool);
    if (copy) std::copy(sum.f32(), sum.f32() + sum.numElements(), rounded.f32());
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(rms_norm, bindRmsNorm)
DTC_CPU_BINDER(rms_norm_grad, bindRmsNormGrad)
DTC_CPU_BINDER(add_rms_norm, bindAddRmsNorm)
DTC_CPU_BINDER(rms_norm_grad_add, bindRmsNormGradAdd)

}  // namespace dtc
