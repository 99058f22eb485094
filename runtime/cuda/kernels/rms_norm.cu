// RMSNorm, with the residual add before it (add_rms_norm) or after its gradient
// (rms_norm_grad_add), and its gradient (cpu/kernels/rms_norm.cc): row sums in double, one block
// per row; the weight's gradient as column sums over row chunks fixed by the shape (LayerNorm's
// chunks and scratch), added in chunk order: deterministic, no atomics. Every activation operand
// may be stored in 16 bits (FloatIn, FloatOut): widened as it is read, rounded once as it is
// written, the math f32 as on the CPU's widened copies, so both backends round the same f32
// values. The binders follow the launchers, with the CPU's contracts (exec/norm_contracts.h).
#include <algorithm>
#include <array>
#include <vector>

#include "common.cuh"
#include "cuda_bind.h"
#include "exec/norm_contracts.h"
#include "float_access.cuh"
#include "float_data.h"
#include "ops/norm_parts.h"

namespace dtc::cuda::kernels {
namespace {

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535)); }

// With `res.data`, the row is x + res (the residual add, rounded as add rounds it), also written to
// `sum`.
__device__ inline float rowAt(FloatIn x, FloatIn res, int64_t i) {
  return res.data ? __fadd_rn(at(x, i), at(res, i)) : at(x, i);
}

__global__ void rmsNormKernel(FloatIn x, FloatIn res, FloatOut sum, FloatIn w, FloatOut y,
                              FloatOut rstd, int64_t rows, int64_t c, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * c;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float v = rowAt(x, res, row + j);
      if (res.data) put(sum, row + j, v);
      sq += static_cast<double>(v) * v;
    }
    sq = blockSum(sq);
    const float s = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(c) + eps));
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      put(y, row + j, rowAt(x, res, row + j) * s * at(w, j));
    if (threadIdx.x == 0) put(rstd, r, s);
  }
}

// The parts of dy, summed left to right as they are read (the adds they replace).
struct DyParts {
  FloatIn part[kRmsNormGradParts];
  int count = 1;
};
__device__ inline float dyAt(const DyParts& dy, int64_t i) {
  float v = at(dy.part[0], i);
  for (int p = 1; p < dy.count; ++p) v = __fadd_rn(v, at(dy.part[p], i));
  return v;
}

// partial [chunks, C]: Σ dy·x·rstd over the chunk's rows, per column.
__global__ void rmsNormWeightPartials(DyParts dy, FloatIn x, FloatIn rstd, int64_t rows, int64_t c,
                                      int64_t chunks, int64_t chunkRows, double* partial) {
  for (int64_t i = globalIndex(); i < chunks * c; i += globalStride()) {
    const int64_t k = i / c, j = i % c;
    double p = 0;
    for (int64_t r = k * chunkRows, end = min(rows, (k + 1) * chunkRows); r < end; ++r)
      p += static_cast<double>(dyAt(dy, r * c + j)) * at(x, r * c + j) * at(rstd, r);
    partial[k * c + j] = p;
  }
}

__global__ void rmsNormWeightSums(const double* partial, int64_t c, int64_t chunks, FloatOut dw) {
  for (int64_t j = globalIndex(); j < c; j += globalStride()) {
    double sum = 0;
    for (int64_t k = 0; k < chunks; ++k) sum += partial[k * c + j];
    put(dw, j, static_cast<float>(sum));
  }
}

// dx = rstd·(g − x·rstd²·mean(g·x)), g = dy·w; with `res.data`, dx + res, also rounded into
// `rounded` where that is given.
__global__ void rmsNormInputGrad(DyParts dy, FloatIn x, FloatIn w, FloatIn rstd, FloatOut dx,
                                 FloatIn res, FloatOut rounded, int64_t rows, int64_t c) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = r * c;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      dot += static_cast<double>(dyAt(dy, row + j)) * at(w, j) * at(x, row + j);
    dot = blockSum(dot);
    const float s = at(rstd, r);
    const float k = static_cast<float>(dot / static_cast<double>(c)) * s * s;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      float v = s * (dyAt(dy, row + j) * at(w, j) - at(x, row + j) * k);
      if (res.data) v = __fadd_rn(at(res, row + j), v);
      put(dx, row + j, v);
      if (rounded.data) put(rounded, row + j, v);
    }
  }
}

// With `res`, x + res is normalized and written to `sum` too (add_rms_norm).
cudaError_t rmsNorm(FloatIn x, FloatIn w, FloatOut y, FloatOut rstd, int64_t rows, int64_t c,
                    float eps, cudaStream_t stream, FloatIn res = {}, FloatOut sum = {}) {
  if (rows > 0 && c > 0)
    rmsNormKernel<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(x, res, sum, w, y, rstd, rows, c,
                                                                 eps);
  return cudaGetLastError();
}

// dy is the sum of `parts` (1 to kRmsNormGradParts) read left to right; with `res`, dx + res
// is written to dx and, where given, rounded into `rounded` (rms_norm_grad_add). `scratch`:
// layerNormGradScratchBytes(rows, c) (ops/cuda_scratch.h).
cudaError_t rmsNormGrad(const FloatIn* dyParts, int parts, FloatIn x, FloatIn w, FloatIn rstd,
                        FloatOut dx, FloatOut dw, int64_t rows, int64_t c, void* scratch,
                        cudaStream_t stream, FloatIn res = {}, FloatOut rounded = {}) {
  if (parts < 1 || parts > static_cast<int>(kRmsNormGradParts)) return cudaErrorInvalidValue;
  if (c <= 0) return cudaGetLastError();
  DyParts dy;
  dy.count = parts;
  for (int p = 0; p < parts; ++p) dy.part[p] = dyParts[p];
  const int64_t chunks = layerNormGradChunks(rows), chunkRows = (rows + chunks - 1) / chunks;
  double* partial = static_cast<double*>(scratch);
  rmsNormWeightPartials<<<blocksFor(chunks * c), kThreads, 0, stream>>>(dy, x, rstd, rows, c,
                                                                        chunks, chunkRows, partial);
  rmsNormWeightSums<<<blocksFor(c), kThreads, 0, stream>>>(partial, c, chunks, dw);
  if (rows > 0)
    rmsNormInputGrad<<<rowBlocks(rows), rowThreads(c), 0, stream>>>(dy, x, w, rstd, dx, res,
                                                                    rounded, rows, c);
  return cudaGetLastError();
}

}  // namespace
}  // namespace dtc::cuda::kernels

namespace dtc::cuda {
namespace {

StatusOr<BoundStep> bindRmsNorm(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const StepContext f32, widenedForm(ctx));
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkRmsNorm(f32));
  const kernels::FloatIn x = in(ctx.inputs[0]), w = in(ctx.inputs[1]);
  const kernels::FloatOut y = out(ctx.outputs[0]), rstd = out(ctx.outputs[1]);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::rmsNorm(x, w, y, rstd, d.rows, d.c, d.eps, stream), where); });
}

StatusOr<BoundStep> bindRmsNormGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const StepContext f32, widenedForm(ctx));
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkRmsNormGrad(f32));
  const kernels::FloatIn dy = in(ctx.inputs[0]), x = in(ctx.inputs[1]), w = in(ctx.inputs[2]),
                         rstd = in(ctx.inputs[3]);
  const kernels::FloatOut dx = out(ctx.outputs[0]), dw = out(ctx.outputs[1]);
  DTC_ASSIGN_OR_RETURN(void* scratch,
                       stepScratch(ctx, dev, kernels::layerNormGradScratchBytes(d.rows, d.c)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::rmsNormGrad(&dy, 1, x, w, rstd, dx, dw, d.rows, d.c, scratch, stream),
                    where);
  });
}

// The residual add and rms_norm of the sum in one pass.
StatusOr<BoundStep> bindAddRmsNorm(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const StepContext f32, widenedForm(ctx));
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkAddRmsNorm(f32));
  const kernels::FloatIn x = in(ctx.inputs[0]), r = in(ctx.inputs[1]), w = in(ctx.inputs[2]);
  const kernels::FloatOut sum = out(ctx.outputs[0]), y = out(ctx.outputs[1]),
                          rstd = out(ctx.outputs[2]);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::rmsNorm(x, w, y, rstd, d.rows, d.c, d.eps, stream, r, sum), where);
  });
}

// rms_norm_grad of the parts of dy summed as they are read, the residual gradient added to dx in
// the same pass, and the sum also rounded to a third output's 16-bit type when there is one.
StatusOr<BoundStep> bindRmsNormGradAdd(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const StepContext f32, widenedForm(ctx));
  DTC_ASSIGN_OR_RETURN(LayerNormDims d, checkRmsNormGradAdd(f32));
  if (ctx.outputs.size() == 3 && !lowPrecision(ctx.outputs[2].dtype))
    return invalid(
        ctx, "the rounded sum must be bfloat16 or float16, got " + dtypeName(ctx.outputs[2].dtype));
  const size_t parts = ctx.inputs.size() - 4;
  std::array<kernels::FloatIn, kRmsNormGradParts> dy{};
  for (size_t p = 0; p < parts; ++p) dy[p] = in(ctx.inputs[p]);
  const kernels::FloatIn x = in(ctx.inputs[parts]), w = in(ctx.inputs[parts + 1]),
                         rstd = in(ctx.inputs[parts + 2]), dres = in(ctx.inputs[parts + 3]);
  const kernels::FloatOut sum = out(ctx.outputs[0]), dw = out(ctx.outputs[1]);
  const kernels::FloatOut rounded =
      ctx.outputs.size() == 3 ? out(ctx.outputs[2]) : kernels::FloatOut{};
  DTC_ASSIGN_OR_RETURN(void* scratch,
                       stepScratch(ctx, dev, kernels::layerNormGradScratchBytes(d.rows, d.c)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::rmsNormGrad(dy.data(), static_cast<int>(parts), x, w, rstd, sum, dw,
                                         d.rows, d.c, scratch, stream, dres, rounded),
                    where);
  });
}

}  // namespace

DTC_CUDA_BINDER(rms_norm, bindRmsNorm)
DTC_CUDA_BINDER(rms_norm_grad, bindRmsNormGrad)
DTC_CUDA_BINDER(add_rms_norm, bindAddRmsNorm)
DTC_CUDA_BINDER(rms_norm_grad_add, bindRmsNormGradAdd)

}  // namespace dtc::cuda
