// Rotary embeddings over rows of D, by position, and their gradient (the transposed rotation);
// their binders check exec/transformer_contracts.h.
#include <algorithm>

#include "cpu/cpu_binders.h"
#include "exec/transformer_contracts.h"

namespace dtc {
namespace {

constexpr int64_t kGrainFloats = 8192;

int64_t rowGrain(int64_t c) { return std::max<int64_t>(1, kGrainFloats / std::max<int64_t>(c, 1)); }

// n elements of rows of D, `heads` consecutive rows at each of T positions in turn (tables cos,
// sin [T, D]): y = x·cos + rotate_half(x)·sin; with `transpose`, the gradient's
// dy·cos + rotate_halfᵀ(dy·sin).
void rotary(const float* x, const float* cos, const float* sin, float* y, int64_t n, int64_t t,
            int64_t d, int64_t heads, bool transpose, ThreadPool& pool) {
  // Rows of D: y = x·cos + R(x)·sin with R(x) = [−x₂, x₁]; the gradient (transpose) is
  // dy·cos + Rᵀ(dy·sin) with Rᵀ(z) = [z₂, −z₁].
  const int64_t h = d / 2, rows = n / std::max<int64_t>(d, 1);
  pool.parallelFor(rows, rowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * d;
      const int64_t position = (r / heads) % t;
      const float *c = cos + position * d, *s = sin + position * d;
      float* out = y + r * d;
      for (int64_t j = 0; j < h; ++j) {
        if (transpose) {
          out[j] = in[j] * c[j] + in[j + h] * s[j + h];
          out[j + h] = in[j + h] * c[j + h] - in[j] * s[j];
        } else {
          out[j] = in[j] * c[j] - in[j + h] * s[j];
          out[j + h] = in[j + h] * c[j + h] + in[j] * s[j + h];
        }
      }
    }
  });
}

template <bool kTranspose>
StatusOr<BoundStep> bindRotary(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(const RotaryDims d, checkRotary(ctx));
  TensorView x = ctx.inputs[0], cos = ctx.inputs[1], sin = ctx.inputs[2], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    rotary(x.f32(), cos.f32(), sin.f32(), y.f32(), d.n, d.t, d.d, d.heads, kTranspose, *pool);
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(rotary, bindRotary<false>)
DTC_CPU_BINDER(rotary_grad, bindRotary<true>)

}  // namespace dtc
