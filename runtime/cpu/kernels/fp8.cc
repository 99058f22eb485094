// FP8 training's kernels on the CPU, emulated exactly (exec/fp8_contracts.h): a tensor's amax,
// quantization with the rounding and saturation of support/float8.h, and the scaled GEMM as an
// f32 GEMM of the widened operands (every product of two FP8 values is exact in f32) times the
// two inverse scales. Their binders follow.
#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "exec/fp8_contracts.h"
#include "support/float8.h"
#include "support/half.h"

namespace dtc {
namespace {

constexpr int64_t kGrain = 16384;

// Element i of a float32 or 16-bit tensor as float32; with `loadBf16`, a float32 one rounded to
// bfloat16 first.
float widened(const TensorView& x, int64_t i, bool loadBf16) {
  switch (x.dtype) {
    case DType::kBF16: return bf16ToF32(reinterpret_cast<const uint16_t*>(x.data)[i]);
    case DType::kF16: return f16ToF32(reinterpret_cast<const uint16_t*>(x.data)[i]);
    default: return loadBf16 ? bf16ToF32(f32ToBf16(x.f32()[i])) : x.f32()[i];
  }
}

uint8_t toFloat8(float v, DType format) {
  return format == DType::kF8E4M3 ? f32ToFloat8<E4M3>(v) : f32ToFloat8<E5M2>(v);
}

float fromFloat8(uint8_t c, DType format) {
  return format == DType::kF8E4M3 ? float8ToF32<E4M3>(c) : float8ToF32<E5M2>(c);
}

// max |x| over the tensor: a maximum, so the chunks' order cannot change it (a NaN wins).
float amaxOf(const TensorView& x, bool loadBf16, ThreadPool& pool) {
  const int64_t n = x.numElements();
  const int64_t chunks = std::max<int64_t>(1, (n + kGrain - 1) / kGrain);
  std::vector<float> partial(static_cast<size_t>(chunks), 0.0f);
  pool.parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      float m = 0.0f;
      for (int64_t i = c * kGrain, stop = std::min(n, (c + 1) * kGrain); i < stop; ++i)
        m = float8AmaxMax(m, std::fabs(widened(x, i, loadBf16)));
      partial[static_cast<size_t>(c)] = m;
    }
  });
  float amax = 0.0f;
  for (float m : partial) amax = float8AmaxMax(amax, m);
  return amax;
}

void quantize(const TensorView& x, float amax, const Fp8QuantizeDims& d, uint8_t* q, uint8_t* qt,
              float* scaleInv, ThreadPool& pool) {
  const float scale = float8Scale(amax, float8Max(d.format));
  pool.parallelFor(d.rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(d.cols, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r)
                       for (int64_t c = 0; c < d.cols; ++c) {
                         const int64_t i = r * d.cols + c;
                         q[i] = toFloat8(widened(x, i, d.loadBf16) * scale, d.format);
                       }
                   });
  if (qt)
    pool.parallelFor(d.cols, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c)
        for (int64_t r = 0; r < d.rows; ++r) qt[c * d.rows + r] = q[r * d.cols + c];
    });
  *scaleInv = 1.0f / scale;
}

StatusOr<BoundStep> bindFp8Amax(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkFp8Amax(ctx));
  const TensorView x = ctx.inputs[0], amax = ctx.outputs[0];
  const bool loadBf16 = fp8LoadsBf16(ctx);
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    amax.f32()[0] = amaxOf(x, loadBf16, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindFp8Quantize(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const Fp8QuantizeDims d, checkFp8Quantize(ctx));
  const TensorView x = ctx.inputs[0], amax = ctx.inputs[1], q = ctx.outputs[0],
                   scale = ctx.outputs[1];
  uint8_t* qt = d.transposed ? ctx.outputs[2].data : nullptr;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    quantize(x, amax.f32()[0], d, q.data, qt, scale.f32(), *pool);
    return Status::Ok();
  });
}

// Delayed scaling: the codes on the given amax, and x's own amax recorded.
StatusOr<BoundStep> bindFp8QuantizeRecorded(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const Fp8QuantizeDims d, checkFp8Quantize(ctx, true));
  const TensorView x = ctx.inputs[0], amax = ctx.inputs[1], q = ctx.outputs[0],
                   scale = ctx.outputs[1], seen = ctx.outputs[2];
  uint8_t* qt = d.transposed ? ctx.outputs[3].data : nullptr;
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    seen.f32()[0] = amaxOf(x, d.loadBf16, *pool);
    quantize(x, amax.f32()[0], d, q.data, qt, scale.f32(), *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindFp8HistoryAmax(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkFp8HistoryAmax(ctx));
  const TensorView history = ctx.inputs[0], amax = ctx.outputs[0];
  const float fmax = static_cast<float>(ctx.floatAttr("fmax"));
  return BoundStep([=] {
    amax.f32()[0] = float8HistoryAmax(history.f32(), history.numElements(), fmax);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindFp8HistoryPush(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(checkFp8HistoryPush(ctx));
  const TensorView history = ctx.inputs[0], out = ctx.outputs[0];
  std::vector<const float*> seen;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) seen.push_back(ctx.inputs[i].f32());
  return BoundStep([=] {
    float m = 0.0f;
    for (const float* s : seen) m = float8AmaxMax(m, *s);
    // Oldest first out; in place when out is the history.
    for (int64_t i = history.numElements() - 1; i > 0; --i) out.f32()[i] = history.f32()[i - 1];
    out.f32()[0] = m;
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindFp8Gemm(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const Fp8GemmDims d, checkFp8Gemm(ctx));
  const TensorView a = ctx.inputs[0], b = ctx.inputs[1], aScale = ctx.inputs[2],
                   bScale = ctx.inputs[3], out = ctx.outputs[0];
  const bool narrow = out.dtype != DType::kF32;
  const uint64_t aBytes = widenedCopyBytes(static_cast<uint64_t>(d.m * d.k)),
                 bBytes = widenedCopyBytes(static_cast<uint64_t>(d.n * d.k)),
                 outBytes = narrow ? widenedCopyBytes(static_cast<uint64_t>(d.m * d.n)) : 0;
  const StepBuffer buffer = stepBuffer(ctx, aBytes + bBytes + outBytes);
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    float* fa = reinterpret_cast<float*>(buffer.data);
    float* fb = reinterpret_cast<float*>(buffer.data + aBytes);
    float* sum = narrow ? reinterpret_cast<float*>(buffer.data + aBytes + bBytes) : out.f32();
    for (auto [from, to, n, format] :
         {std::tuple{a.data, fa, d.m * d.k, a.dtype}, std::tuple{b.data, fb, d.n * d.k, b.dtype}})
      for (int64_t i = 0; i < n; ++i) to[i] = fromFloat8(from[i], format);
    cpu::matmul(fa, fb, sum, d.m, d.n, d.k, /*transA=*/false, /*transB=*/true, *pool);
    const float factor = aScale.f32()[0] * bScale.f32()[0];
    const int64_t n = d.m * d.n;
    for (int64_t i = 0; i < n; ++i) sum[i] *= factor;
    if (narrow) fromF32(sum, out);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(fp8_amax, bindFp8Amax)
DTC_CPU_BINDER(fp8_quantize, bindFp8Quantize)
DTC_CPU_BINDER(fp8_quantize_recorded, bindFp8QuantizeRecorded)
DTC_CPU_BINDER(fp8_history_amax, bindFp8HistoryAmax)
DTC_CPU_BINDER(fp8_history_push, bindFp8HistoryPush)
DTC_CPU_BINDER(fp8_gemm, bindFp8Gemm)

}  // namespace dtc
