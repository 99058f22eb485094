// The operand contracts of FP8 training's kernels, shared by the CPU (which emulates them
// exactly) and CUDA (cuBLASLt's FP8 GEMMs) so both accept the same steps and refuse the others
// with the same messages.
//
// fp8_amax: x -> amax [1] = max |x| over the whole tensor (f32; a NaN wins). Its own step so a
// split tensor's ranks can agree on one maximum (an all-reduce MAX) before they quantize.
// Both take `load_bf16`: x float32, each element rounded to bfloat16 (to nearest even) as it is
// loaded, the values of a narrowing cast without its copy.
//
// fp8_quantize: (x, amax) -> (q, scale_inv[, q_t]). Per-tensor dynamic scaling, as torchao's
// "tensorwise" recipe: scale = fmax / max(amax, 1e-12) (fmax 448 for e4m3fn, 57344 for e5m2; the
// quotient in double, rounded to f32), q = x·scale (f32) rounded to q's format, saturating
// (support/float8.h); scale_inv = 1 / scale (f32), what the GEMM multiplies by. With q_t, also
// x's transpose so quantized: x [d0, ..., dn-2, C] gives q_t [C, d0, ..., dn-2], the operand
// whose contraction runs over x's rows, K-major.
//
// fp8_quantize_recorded: (x, amax) -> (q, scale_inv, seen[, q_t]): fp8_quantize on the given
// amax (delayed scaling's, from earlier steps), with x's own amax as `seen`, from the same pass.
// fp8_history_amax: history [H] -> amax [1] = max(history) where above 0, else `fmax` (scale 1,
// Transformer Engine's first step). fp8_history_push: (history [H], seen... [1]) -> [max(seen),
// history[0], ..., history[H-2]].
//
// fp8_gemm: (a [M..., K...], b [N..., K...], a_scale_inv, b_scale_inv) -> out [M..., N...] =
// (a · bᵀ) · a_scale_inv · b_scale_inv over the last `contract_dims` dimensions of both (1 when
// absent), the products summed in f32, out f32 or 16-bit (rounded once). Both operands K-major,
// as Hopper's FP8 tensor cores take them; e5m2 times e5m2 has no kernel there.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "exec/bind_util.h"
#include "exec/precision_contracts.h"
#include "support/float8.h"

namespace dtc {

// The largest finite magnitude of an FP8 format.
inline float float8Max(DType t) { return t == DType::kF8E4M3 ? kE4M3Max : kE5M2Max; }

struct Fp8QuantizeDims {
  int64_t rows = 0, cols = 0;  // x seen as [rows, cols]
  DType format = DType::kF8E4M3;
  bool transposed = false;  // q_t is written
  bool loadBf16 = false;
};

// Whether x's elements are rounded to bfloat16 as they are loaded.
inline bool fp8LoadsBf16(const StepContext& ctx) { return ctx.intAttr("load_bf16") != 0; }

inline Status checkFp8Source(const StepContext& ctx, const TensorView& x) {
  if (x.dtype != DType::kF32 && !lowPrecision(x.dtype))
    return invalid(ctx, "x must be float32, bfloat16 or float16, not " + dtypeName(x.dtype));
  if (fp8LoadsBf16(ctx) && x.dtype != DType::kF32)
    return invalid(ctx, "load_bf16 reads a float32 x, not " + dtypeName(x.dtype));
  return Status::Ok();
}

inline Status checkFp8Amax(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 1 input (x) and 1 output (amax)");
  DTC_RETURN_IF_ERROR(checkFp8Source(ctx, ctx.inputs[0]));
  const TensorView& amax = ctx.outputs[0];
  if (amax.dtype != DType::kF32 || amax.numElements() != 1)
    return invalid(ctx, "amax must be one float32");
  return Status::Ok();
}

// `recorded`: fp8_quantize_recorded, whose third output is x's own amax.
inline StatusOr<Fp8QuantizeDims> checkFp8Quantize(const StepContext& ctx, bool recorded = false) {
  const size_t fixed = recorded ? 3 : 2;
  if (ctx.inputs.size() != 2 || (ctx.outputs.size() != fixed && ctx.outputs.size() != fixed + 1))
    return invalid(ctx, recorded ? "expects 2 inputs (x, amax) and 3 or 4 outputs (q, scale_inv, "
                                   "seen[, q_t])"
                                 : "expects 2 inputs (x, amax) and 2 or 3 outputs (q, "
                                   "scale_inv[, q_t])");
  const TensorView &x = ctx.inputs[0], &amax = ctx.inputs[1], &q = ctx.outputs[0],
                   &scale = ctx.outputs[1];
  if (recorded && (ctx.outputs[2].dtype != DType::kF32 || ctx.outputs[2].numElements() != 1))
    return invalid(ctx, "seen must be one float32");
  DTC_RETURN_IF_ERROR(checkFp8Source(ctx, x));
  if (amax.dtype != DType::kF32 || amax.numElements() != 1)
    return invalid(ctx, "amax must be one float32");
  if (!float8(q.dtype))
    return invalid(ctx, "q must be float8_e4m3fn or float8_e5m2, not " + dtypeName(q.dtype));
  if (x.shape.empty() || q.shape != x.shape)
    return invalid(ctx, "q " + str(q.shape) + " must have x's shape " + str(x.shape) +
                            " (at least one dimension)");
  if (scale.dtype != DType::kF32 || scale.numElements() != 1)
    return invalid(ctx, "scale_inv must be one float32");
  Fp8QuantizeDims d;
  d.cols = x.shape.back();
  d.rows = d.cols > 0 ? x.numElements() / d.cols : 0;
  d.format = q.dtype;
  d.loadBf16 = fp8LoadsBf16(ctx);
  if (ctx.outputs.size() == fixed + 1) {
    const TensorView& t = ctx.outputs[fixed];
    Shape want = {d.cols};
    want.insert(want.end(), x.shape.begin(), x.shape.end() - 1);
    if (t.dtype != q.dtype || t.shape != want)
      return invalid(ctx, "q_t must be " + dtypeName(q.dtype) + " " + str(want) +
                              ", x's transpose, got " + dtypeName(t.dtype) + " " + str(t.shape));
    d.transposed = true;
  }
  return d;
}

inline Status checkFp8HistoryAmax(const StepContext& ctx) {
  if (ctx.inputs.size() != 1 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 1 input (history) and 1 output (amax)");
  if (ctx.inputs[0].shape.size() != 1 || ctx.inputs[0].numElements() < 1 ||
      ctx.outputs[0].numElements() != 1)
    return invalid(ctx, "takes a history [H] and gives one float32");
  if (!(ctx.floatAttr("fmax") > 0)) return invalid(ctx, "fmax must be above 0");
  return Status::Ok();
}

inline Status checkFp8HistoryPush(const StepContext& ctx) {
  if (ctx.inputs.size() < 2 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects a history, one or more amaxes, and 1 output");
  if (ctx.inputs[0].shape.size() != 1 || ctx.outputs[0].shape != ctx.inputs[0].shape)
    return invalid(ctx, "new_history must be the history's [H]");
  for (size_t i = 1; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i].numElements() != 1) return invalid(ctx, "each amax must be one float32");
  return Status::Ok();
}

struct Fp8GemmDims {
  int64_t m = 0, n = 0, k = 0;
};

inline StatusOr<Fp8GemmDims> checkFp8Gemm(const StepContext& ctx) {
  if (ctx.inputs.size() != 4 || ctx.outputs.size() != 1)
    return invalid(ctx, "expects 4 inputs (a, b, a_scale_inv, b_scale_inv) and 1 output");
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &out = ctx.outputs[0];
  if (!float8(a.dtype) || !float8(b.dtype))
    return invalid(ctx, "a and b must be float8_e4m3fn or float8_e5m2, got " + dtypeName(a.dtype) +
                            " and " + dtypeName(b.dtype));
  if (a.dtype == DType::kF8E5M2 && b.dtype == DType::kF8E5M2)
    return invalid(ctx, "a and b cannot both be float8_e5m2 (one must be e4m3fn)");
  for (const TensorView* s : {&ctx.inputs[2], &ctx.inputs[3]})
    if (s->dtype != DType::kF32 || s->numElements() != 1)
      return invalid(ctx, "each scale_inv must be one float32");
  const int64_t c = ctx.hasAttr("contract_dims") ? ctx.intAttr("contract_dims") : 1;
  const auto rankA = static_cast<int64_t>(a.shape.size()),
             rankB = static_cast<int64_t>(b.shape.size());
  if (c < 1 || c >= rankA || c >= rankB)
    return invalid(ctx, "contract_dims " + std::to_string(c) + " must leave a and b (" +
                            str(a.shape) + ", " + str(b.shape) + ") a leading dimension");
  if (!std::equal(a.shape.end() - c, a.shape.end(), b.shape.end() - c))
    return invalid(ctx, "a [M..., K...] and b [N..., K...] must share their last " +
                            std::to_string(c) + " dimensions, got " + str(a.shape) + " and " +
                            str(b.shape));
  Shape want(a.shape.begin(), a.shape.end() - c);
  want.insert(want.end(), b.shape.begin(), b.shape.end() - c);
  auto product = [](Shape::const_iterator from, Shape::const_iterator to) {
    int64_t p = 1;
    for (; from != to; ++from) p *= *from;
    return p;
  };
  Fp8GemmDims d{product(a.shape.begin(), a.shape.end() - c),
                product(b.shape.begin(), b.shape.end() - c),
                product(a.shape.end() - c, a.shape.end())};
  if (out.dtype != DType::kF32 && !lowPrecision(out.dtype))
    return invalid(ctx, "out must be float32, bfloat16 or float16, not " + dtypeName(out.dtype));
  if (out.shape != want)
    return invalid(ctx, "out must be " + str(want) + ", got " + str(out.shape));
  return d;
}

}  // namespace dtc
