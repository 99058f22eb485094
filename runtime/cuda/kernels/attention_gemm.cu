// The row passes of causal attention's GEMM path (cuda_attention_table.cc): cuBLAS computes the
// [T, T] products of every slice on the tensor cores, these kernels turn them, one block per
// query row, into what the next GEMM multiplies. The CPU's formulas
// (cpu/kernels/flash_attention.cc) in float32: the 16-bit operands are widened exactly
// (cpu/kernels/half.h), and what a later GEMM reads (P, dS) is rounded once to nearest even, as
// FlashAttention-2 rounds P for its P·V product and dS for its dS·K and dSᵀ·Q products. Every
// reduction is a fixed tree (blockReduce) and nothing is atomic, so a rerun gives the same bits.
#include <algorithm>

#include "common.cuh"
#include "half.cuh"
#include "launchers.h"

namespace dtc::cuda::kernels {
namespace {

// Exact: every bf16 and f16 value is a float.
template <Float F>
__device__ inline float widen(uint16_t x) {
  if constexpr (F == Float::kBF16)
    return bf16ToF32(x);
  else
    return f16ToF32(x);
}

// Rounds to nearest even, bit for bit the CPU's fromF32.
template <Float F>
__device__ inline uint16_t narrow(float x) {
  if constexpr (F == Float::kBF16)
    return f32ToBf16(x);
  else
    return f32ToF16(x);
}

// Forward, row r = (slice, query i): lse_i = log Σ_{j≤i} exp(scale·s_ij) as the CPU forms it
// (the largest scaled score plus the log of the sum of exponentials relative to it), and p_ij =
// exp(scale·s_ij − lse_i) rounded to F, 0 above the diagonal (the next GEMM sums whole rows).
// One online pass per thread (its own running max and sum) then a block combine, so the scores
// are read twice, not three times; only j ≤ i is read. p as exp(x − lse) with the same float
// expression the backward pass uses, so both recompute the same probabilities from the same S.
template <Float F>
__global__ void softmaxRowsKernel(const float* __restrict__ s, float* __restrict__ lse,
                                  uint16_t* __restrict__ p, int64_t rows, int64_t t, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % t;  // keys 0..i are visible
    const float* in = s + r * t;
    uint16_t* prob = p + r * t;
    float m = -INFINITY, l = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
      const float x = scale * in[j];
      if (x > m) {
        l = l * expf(m - x) + 1.0f;  // exp(−inf) = 0 on this thread's first key
        m = x;
      } else {
        l += expf(x - m);
      }
    }
    const float rowMax = blockMax(m);
    // A thread that saw no key (m = −inf: i + 1 < blockDim.x) adds nothing, not exp(NaN).
    const float sum = blockSum(m == -INFINITY ? 0.0f : l * expf(m - rowMax));
    const float rowLse = rowMax + logf(sum);
    if (threadIdx.x == 0) lse[r] = rowLse;
    for (int64_t j = threadIdx.x; j < t; j += blockDim.x)
      prob[j] = narrow<F>(j <= i ? expf(scale * in[j] - rowLse) : 0.0f);
  }
}

// Backward, row r: D_i = dout_i · out_i (widened, summed in f32), then over the visible keys p_ij
// = exp(scale·s_ij − lse_i) in f32 (the forward's expression) and ds_ij = p_ij (dp_ij − D_i) ·
// scale from that unrounded p, each rounded once to F only as it is stored; both 0 above the
// diagonal. Recomputing p here (rather than reading back the rounded copy) keeps dS the CPU's
// formula on the f32 probability, for the cost of one exp per element in a memory-bound pass.
// Row 0 sees one key: its softmax is the constant 1, whose gradient is exactly 0, so ds is 0
// there (as on the CPU, where out_0 = v_0 makes dp − D exactly 0); dp (cuBLAS's summation
// order) and D (this block's) would otherwise leave an ulp of their sum, and T = 1 gradients of
// dq and dk that should be 0.
template <Float F>
__global__ void gradRowsKernel(const float* __restrict__ s, const float* __restrict__ dp,
                               const float* __restrict__ lse, const uint16_t* __restrict__ dout,
                               const uint16_t* __restrict__ out, uint16_t* __restrict__ p,
                               uint16_t* __restrict__ ds, int64_t rows, int64_t t, int64_t d,
                               float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % t;
    float dot = 0;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
      dot += widen<F>(dout[r * d + c]) * widen<F>(out[r * d + c]);
    const float rowD = blockSum(dot);
    const float rowLse = lse[r];
    const float* sr = s + r * t;
    const float* dpr = dp + r * t;
    uint16_t* pr = p + r * t;
    uint16_t* dsr = ds + r * t;
    for (int64_t j = threadIdx.x; j < t; j += blockDim.x) {
      float pv = 0, dsv = 0;
      if (j <= i) {
        pv = expf(scale * sr[j] - rowLse);
        dsv = i == 0 ? 0.0f : pv * (dpr[j] - rowD) * scale;
      }
      pr[j] = narrow<F>(pv);
      dsr[j] = narrow<F>(dsv);
    }
  }
}

// One block per row, grid-stride beyond this many (far more than fill any GPU).
unsigned rowGrid(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
}

}  // namespace

cudaError_t attentionSoftmaxRows(Float type, const float* s, float* lse, void* p, int64_t slices,
                                 int64_t t, float scale, cudaStream_t stream) {
  const int64_t rows = slices * t;
  if (rows <= 0) return cudaGetLastError();
  uint16_t* pw = static_cast<uint16_t*>(p);
  switch (type) {
    case Float::kBF16:
      softmaxRowsKernel<Float::kBF16>
          <<<rowGrid(rows), rowThreads(t), 0, stream>>>(s, lse, pw, rows, t, scale);
      break;
    case Float::kF16:
      softmaxRowsKernel<Float::kF16>
          <<<rowGrid(rows), rowThreads(t), 0, stream>>>(s, lse, pw, rows, t, scale);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t attentionGradRows(Float type, const float* s, const float* dp, const float* lse,
                              const void* dout, const void* out, void* p, void* ds, int64_t slices,
                              int64_t t, int64_t d, float scale, cudaStream_t stream) {
  const int64_t rows = slices * t;
  if (rows <= 0) return cudaGetLastError();
  const uint16_t *dw = static_cast<const uint16_t*>(dout), *ow = static_cast<const uint16_t*>(out);
  uint16_t *pw = static_cast<uint16_t*>(p), *dsw = static_cast<uint16_t*>(ds);
  switch (type) {
    case Float::kBF16:
      gradRowsKernel<Float::kBF16><<<rowGrid(rows), rowThreads(t), 0, stream>>>(
          s, dp, lse, dw, ow, pw, dsw, rows, t, d, scale);
      break;
    case Float::kF16:
      gradRowsKernel<Float::kF16><<<rowGrid(rows), rowThreads(t), 0, stream>>>(
          s, dp, lse, dw, ow, pw, dsw, rows, t, d, scale);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace dtc::cuda::kernels
