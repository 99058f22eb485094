// Flash attention on CUDA, FlashAttention-2 style (see flash_attention.h). fp32 on the CUDA
// cores: TF32 tensor cores would cost ~1e-3 relative error against the CPU parity of 1e-5.
//
// bf16 / f16 operands: every kernel is templated on the element type F, and only the global
// loads (widened exactly, cpu/kernels/half.h) and the final stores (rounded once, to nearest even)
// see it. The shared-memory tiles stay float32: each tile element is read by 16 threads in the
// inner loops, so widening once on load keeps those loops (every sum's order, every rounding) the
// float32 kernels' own, compiled alike: a 16-bit step computes bit for bit what the float32
// kernels compute on widened copies, the scheme of the CPU's bindLowPrecision, so 16-bit parity
// is the float32 parity plus one rounding. The cost is shared memory, unchanged from float32:
// 165,376 bytes for D = 128 (dk, dv), within the opt-in of A100 (163 KiB) and H100 (227 KiB).
// 16-bit tiles would halve the operand tiles but convert on every inner-loop read and lose the
// HD + 1 padding's conflict-free banks (two 16-bit elements to a 4-byte bank word).
//
// Every kernel runs 256 threads as a 16 × 16 grid over a 64 × 64 tile of scores: thread
// (ty, tx) owns score rows ty + 16a and columns tx + 16b (a, b < 4), and rows ty + 16a ×
// columns tx + 16n (n < HD/16) of its [64, HD] accumulator, in registers. The 16 threads of a
// row are one half-warp, so row reductions are shuffles. Operand tiles are zero-padded to HD
// (32, 64 or 128) columns and their rows to HD + 1 floats, so the column-strided reads of k and
// v hit 32 different banks. The backward pass is a pre-pass for D_i = dout_i · out_i, then a
// kernel per key tile (dk, dv) and one per query tile (dq). Each sum runs in one fixed order and
// nothing is atomic: reruns give the same bits.
//
// Context parallelism hands the kernels blocks of a sequence (Blocks): the queries' block, the
// keys whole or a block of their own, the sequence perhaps load-balanced. The mask is then the
// positions' (ops/attention_positions.h, the CPU's), and a tile pair is skipped when no query of
// one sees a key of the other (a block-wide vote, before any load); on a plain sequence that is
// exactly the tiles above the diagonal, which the loops' bounds already leave out.
#include <algorithm>
#include <climits>

#include "common.cuh"
#include "flash_attention.h"
#include "half.cuh"
#include "ops/attention_positions.h"

namespace dtc::cuda::kernels {
namespace {

// The stored element of each Float: the 16-bit types as raw words (cpu/kernels/half.h converts
// them).
template <Float F>
struct Element {
  using Type = uint16_t;
};
template <>
struct Element<Float::kF32> {
  using Type = float;
};
template <Float F>
using Elem = typename Element<F>::Type;

// Exact: every bf16 and f16 value is a float.
template <Float F>
__device__ inline float widen(Elem<F> x) {
  if constexpr (F == Float::kF32)
    return x;
  else if constexpr (F == Float::kBF16)
    return bf16ToF32(x);
  else
    return f16ToF32(x);
}

// Rounds to nearest even, bit for bit the CPU's fromF32 (NaN payloads included).
template <Float F>
__device__ inline Elem<F> narrow(float x) {
  if constexpr (F == Float::kF32)
    return x;
  else if constexpr (F == Float::kBF16)
    return f32ToBf16(x);
  else
    return f32ToF16(x);
}

constexpr int kTile = 64;            // queries per query tile, keys per key tile
constexpr int kFlashThreads = 256;   // 16 × 16
constexpr int kScoreLd = kTile + 1;  // row stride of a shared 64 × 64 score tile

// The step's queries and keys: tq and tk rows of each slice, placed by `at` (context
// parallelism: a block of the queries, of the keys, the load-balanced layout;
// ops/attention_positions.h, the CPU kernels' own test). Query i sees key j when j's place in the
// original sequence is not after i's.
struct Blocks {
  int64_t tq = 0, tk = 0;
  // Grouped-query attention: query slice s reads key/value slice s / group.
  int64_t group = 1;
  AttentionPositions at;
  bool plain =
      true;  // tq = tk and at.plain(): j <= i, and the tiles above the diagonal are skipped

  __device__ bool visible(int64_t i, int64_t j) const {
    if (i >= tq || j >= tk) return false;
    return plain ? j <= i : at.keyPosition(j) <= at.queryPosition(i);
  }
  // Whether this thread's scores of the (q0, k0) tile hold a visible one.
  __device__ bool anyVisible(int64_t q0, int64_t k0) const {
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    bool seen = false;
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) seen |= visible(q0 + ty + 16 * a, k0 + tx + 16 * b);
    return seen;
  }
};

// A [kTile, HD] tile of one slice's [T, D] operand from row `row0`, zero past T and D: the
// zeros add nothing to the dot products, so a sum over HD columns is the CPU's over D.
template <Float F, int HD>
__device__ void loadTile(float* dst, const Elem<F>* __restrict__ src, int64_t row0, int64_t t,
                         int d) {
  for (int e = threadIdx.x; e < kTile * HD; e += kFlashThreads) {
    const int r = e / HD, c = e % HD;
    const int64_t row = row0 + r;
    dst[r * (HD + 1) + c] = row < t && c < d ? widen<F>(src[row * d + c]) : 0.0f;
  }
}

// Reduces over the 16 threads of one row (a half-warp), each getting the result. A butterfly:
// each step combines the same two partials in either order, so all 16 agree to the bit. Every
// thread of the warp must call it.
template <typename Op>
__device__ float rowReduce(float v, Op op) {
  for (int offset = 8; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// acc[a][b] += Σ_c x[ty + 16a][c] · y[tx + 16b][c], c in increasing order: the CPU's dot product
// term by term (the plugin builds with --fmad=false, so each product rounds before the add, as
// on the CPU). x and y are shared [kTile, HD] tiles.
template <int HD>
__device__ void dotTile(const float* x, const float* y, float (&acc)[4][4]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 4
  for (int c = 0; c < HD; ++c) {
    float xa[4], yb[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) xa[a] = x[(ty + 16 * a) * (HD + 1) + c];
#pragma unroll
    for (int b = 0; b < 4; ++b) yb[b] = y[(tx + 16 * b) * (HD + 1) + c];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) acc[a][b] += xa[a] * yb[b];
  }
}

// acc[a][n] += Σ_j s[ty + 16a][j] · y[j][tx + 16n] over j in increasing order, where s is a shared
// score tile, read transposed (s[j][ty + 16a]) when kTransposed, and y a shared [kTile, HD] tile.
template <int HD, bool kTransposed>
__device__ void productTile(const float* s, const float* y, float (&acc)[4][HD / 16]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 2
  for (int j = 0; j < kTile; ++j) {
    float sa[4], yn[HD / 16];
#pragma unroll
    for (int a = 0; a < 4; ++a)
      sa[a] = kTransposed ? s[j * kScoreLd + ty + 16 * a] : s[(ty + 16 * a) * kScoreLd + j];
#pragma unroll
    for (int n = 0; n < HD / 16; ++n) yn[n] = y[j * (HD + 1) + tx + 16 * n];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int n = 0; n < HD / 16; ++n) acc[a][n] += sa[a] * yn[n];
  }
}

// Writes this thread's rows ty + 16a, columns tx + 16n of acc to rows row0.. of a [T, D] slice,
// each rounded once to F.
template <Float F, int HD>
__device__ void storeRows(Elem<F>* __restrict__ dst, const float (&acc)[4][HD / 16], int64_t row0,
                          int64_t t, int d) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int64_t row = row0 + ty + 16 * a;
#pragma unroll
    for (int n = 0; n < HD / 16; ++n)
      if (row < t && tx + 16 * n < d) dst[row * d + tx + 16 * n] = narrow<F>(acc[a][n]);
  }
}

// lse_i and D_i of this thread's rows ty + 16a of the query tile at q0 (0 past T). lse and rowD
// point at the slice's rows.
__device__ void queryRows(const float* __restrict__ lse, const float* __restrict__ rowD, int64_t q0,
                          int64_t t, float (&rowLse)[4], float (&rowDs)[4]) {
  const int ty = threadIdx.x / 16;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int64_t i = q0 + ty + 16 * a;
    rowLse[a] = i < t ? lse[i] : 0.0f;
    rowDs[a] = i < t ? rowD[i] : 0.0f;
  }
}

// D_i = dout_i · out_i, the softmax gradient's correction term, once per row before the two
// backward kernels. One thread per row summing c in increasing order: the order of dotTile's
// dp_ij = dout_i · v_j, so where out_i = v_j exactly (a row that sees one key) dp − D is exactly
// 0, as on the CPU (a tree sum here would leave an ulp, and T = 1 gradients that should be 0).
// In float32 for 16-bit operands too: out is then the rounded forward output, as on the CPU.
template <Float F>
__global__ void __launch_bounds__(kFlashThreads, 1)
    rowDotKernel(const Elem<F>* __restrict__ dout, const Elem<F>* __restrict__ out,
                 float* __restrict__ rowD, int64_t rows, int d) {
  for (int64_t r = globalIndex(); r < rows; r += globalStride()) {
    float sum = 0;
    for (int c = 0; c < d; ++c) sum += widen<F>(dout[r * d + c]) * widen<F>(out[r * d + c]);
    rowD[r] = sum;
  }
}

// The backward pass's tile of p_ij = exp(scale·q_i·k_j − lse_i) (0 where i does not see j) and
// ds_ij = p_ij (dp_ij − D_i) · scale, from the raw dot products s and dp = dout_i · v_j; written
// to the shared tiles (row = query) ps (when not null) and dss. The CPU's formula, in float.
__device__ void gradTiles(const float (&s)[4][4], const float (&dp)[4][4], const float (&rowLse)[4],
                          const float (&rowD)[4], int64_t q0, int64_t k0, const Blocks& blk,
                          float scale, float* ps, float* dss) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int64_t i = q0 + ty + 16 * a;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int64_t j = k0 + tx + 16 * b;
      const float p = blk.visible(i, j) ? expf(scale * s[a][b] - rowLse[a]) : 0.0f;
      const int at = (ty + 16 * a) * kScoreLd + tx + 16 * b;
      if (ps) ps[at] = p;
      dss[at] = p * (dp[a][b] - rowD[a]) * scale;
    }
  }
}

// Forward: one block per (slice, query tile); the key tiles holding a key the tile's queries see
// (plain: those at or below the diagonal) stream through shared memory with an online softmax
// (running max m and sum l per row, the accumulator rescaled when m grows). Blocks of the last
// query tiles (the longest) go first. A query that sees no key (a block of the keys that comes
// later in the sequence) gets out 0 and lse −inf, as on the CPU.
template <Float F, int HD>
__global__ void __launch_bounds__(kFlashThreads, 1)
    forwardKernel(const Elem<F>* __restrict__ q, const Elem<F>* __restrict__ k,
                  const Elem<F>* __restrict__ v, Elem<F>* __restrict__ out, float* __restrict__ lse,
                  int64_t slices, Blocks blk, int d, float scale, int queryTiles, int keyTiles) {
  extern __shared__ float shared[];
  float* qs = shared;
  float* ks = qs + kTile * (HD + 1);
  float* vs = ks + kTile * (HD + 1);
  float* ps = vs + kTile * (HD + 1);
  const int64_t slice = blockIdx.x % slices;
  const int qt = queryTiles - 1 - static_cast<int>(blockIdx.x / slices);
  const int64_t qBase = slice * blk.tq * d, kBase = slice / blk.group * blk.tk * d,
                q0 = static_cast<int64_t>(qt) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  loadTile<F, HD>(qs, q + qBase, q0, blk.tq, d);
  float m[4], l[4], o[4][HD / 16];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    m[a] = -INFINITY;
    l[a] = 0;
#pragma unroll
    for (int n = 0; n < HD / 16; ++n) o[a][n] = 0;
  }
  const int lastKeyTile = blk.plain ? qt : keyTiles - 1;
  for (int kt = 0; kt <= lastKeyTile; ++kt) {
    const int64_t k0 = static_cast<int64_t>(kt) * kTile;
    // Also the barrier after the previous key tile's readers of ks, vs and ps.
    if (!__syncthreads_or(blk.anyVisible(q0, k0))) continue;
    loadTile<F, HD>(ks, k + kBase, k0, blk.tk, d);
    loadTile<F, HD>(vs, v + kBase, k0, blk.tk, d);
    __syncthreads();
    float s[4][4] = {};
    dotTile<HD>(qs, ks, s);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int64_t i = q0 + ty + 16 * a;
      float tileMax = -INFINITY;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int64_t j = k0 + tx + 16 * b;
        s[a][b] = blk.visible(i, j) ? scale * s[a][b] : -INFINITY;
        tileMax = MaxOp{}(tileMax, s[a][b]);
      }
      const float mNew = MaxOp{}(m[a], rowReduce(tileMax, MaxOp{}));
      // A row that has seen no key yet keeps m = −inf: exp(−inf − 0) = 0 then, not NaN.
      const float ref = mNew == -INFINITY ? 0.0f : mNew;
      const float alpha = expf(m[a] - ref);  // 0 on the first tile (m = −inf)
      float sum = 0;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const float p = expf(s[a][b] - ref);
        ps[(ty + 16 * a) * kScoreLd + tx + 16 * b] = p;
        sum += p;
      }
      l[a] = l[a] * alpha + rowReduce(sum, SumOp{});
      m[a] = mNew;
#pragma unroll
      for (int n = 0; n < HD / 16; ++n) o[a][n] *= alpha;
    }
    __syncthreads();
    productTile<HD, false>(ps, vs, o);
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const bool seen = l[a] > 0;
#pragma unroll
    for (int n = 0; n < HD / 16; ++n) o[a][n] = seen ? o[a][n] / l[a] : 0.0f;
    const int64_t i = q0 + ty + 16 * a;
    if (tx == 0 && i < blk.tq) lse[slice * blk.tq + i] = seen ? m[a] + logf(l[a]) : -INFINITY;
  }
  storeRows<F, HD>(out + qBase, o, q0, blk.tq, d);
}

// Backward, dk and dv: one block per (key/value slice, key tile), keeping its k and v tiles in
// shared memory and dk, dv in registers while the query tiles that see one of its keys (plain:
// those at or below the diagonal) of each query slice of its group stream through:
// dv_j += Σ_i p_ij dout_i, dk_j += Σ_i ds_ij q_i (scale inside ds). Key tile 0 (the longest)
// first.
template <Float F, int HD>
__global__ void __launch_bounds__(kFlashThreads, 1)
    keyValueGradKernel(const Elem<F>* __restrict__ dout, const Elem<F>* __restrict__ q,
                       const Elem<F>* __restrict__ k, const Elem<F>* __restrict__ v,
                       const float* __restrict__ lse, const float* __restrict__ rowD,
                       Elem<F>* __restrict__ dk, Elem<F>* __restrict__ dv, int64_t kvSlices,
                       Blocks blk, int d, float scale, int queryTiles) {
  extern __shared__ float shared[];
  float* qs = shared;
  float* dos = qs + kTile * (HD + 1);
  float* ks = dos + kTile * (HD + 1);
  float* vs = ks + kTile * (HD + 1);
  float* ps = vs + kTile * (HD + 1);
  float* dss = ps + kTile * kScoreLd;
  const int64_t kvSlice = blockIdx.x % kvSlices;
  const int kt = static_cast<int>(blockIdx.x / kvSlices);
  const int64_t kBase = kvSlice * blk.tk * d, k0 = static_cast<int64_t>(kt) * kTile;
  loadTile<F, HD>(ks, k + kBase, k0, blk.tk, d);
  loadTile<F, HD>(vs, v + kBase, k0, blk.tk, d);
  float gk[4][HD / 16] = {}, gv[4][HD / 16] = {};
  // The query slices of the group in order, so the sums keep one order from run to run.
  for (int64_t slice = kvSlice * blk.group; slice < (kvSlice + 1) * blk.group; ++slice) {
    const int64_t qBase = slice * blk.tq * d;
    for (int qt = blk.plain ? kt : 0; qt < queryTiles; ++qt) {
      const int64_t q0 = static_cast<int64_t>(qt) * kTile;
      // Also the barrier after the previous query tile's readers of qs, dos, ps and dss.
      if (!__syncthreads_or(blk.anyVisible(q0, k0))) continue;
      loadTile<F, HD>(qs, q + qBase, q0, blk.tq, d);
      loadTile<F, HD>(dos, dout + qBase, q0, blk.tq, d);
      __syncthreads();
      float rowLse[4], rowDs[4];
      queryRows(lse + slice * blk.tq, rowD + slice * blk.tq, q0, blk.tq, rowLse, rowDs);
      float s[4][4] = {}, dp[4][4] = {};
      dotTile<HD>(qs, ks, s);
      dotTile<HD>(dos, vs, dp);
      gradTiles(s, dp, rowLse, rowDs, q0, k0, blk, scale, ps, dss);
      __syncthreads();
      productTile<HD, true>(ps, dos, gv);
      productTile<HD, true>(dss, qs, gk);
    }
  }
  storeRows<F, HD>(dk + kBase, gk, k0, blk.tk, d);
  storeRows<F, HD>(dv + kBase, gv, k0, blk.tk, d);
}

// Backward, dq: one block per (slice, query tile), the second pass over the same tiles that
// keeps dq deterministic (no atomics across key-tile blocks): dq_i += Σ_j ds_ij k_j with the
// probabilities recomputed. The last query tiles (the longest) first.
template <Float F, int HD>
__global__ void __launch_bounds__(kFlashThreads, 1)
    queryGradKernel(const Elem<F>* __restrict__ dout, const Elem<F>* __restrict__ q,
                    const Elem<F>* __restrict__ k, const Elem<F>* __restrict__ v,
                    const float* __restrict__ lse, const float* __restrict__ rowD,
                    Elem<F>* __restrict__ dq, int64_t slices, Blocks blk, int d, float scale,
                    int queryTiles, int keyTiles) {
  extern __shared__ float shared[];
  float* qs = shared;
  float* dos = qs + kTile * (HD + 1);
  float* ks = dos + kTile * (HD + 1);
  float* vs = ks + kTile * (HD + 1);
  float* dss = vs + kTile * (HD + 1);
  const int64_t slice = blockIdx.x % slices;
  const int qt = queryTiles - 1 - static_cast<int>(blockIdx.x / slices);
  const int64_t qBase = slice * blk.tq * d, kBase = slice / blk.group * blk.tk * d,
                q0 = static_cast<int64_t>(qt) * kTile;
  loadTile<F, HD>(qs, q + qBase, q0, blk.tq, d);
  loadTile<F, HD>(dos, dout + qBase, q0, blk.tq, d);  // read after the loop's first barrier
  float rowLse[4], rowDs[4];
  queryRows(lse + slice * blk.tq, rowD + slice * blk.tq, q0, blk.tq, rowLse, rowDs);
  float gq[4][HD / 16] = {};
  const int lastKeyTile = blk.plain ? qt : keyTiles - 1;
  for (int kt = 0; kt <= lastKeyTile; ++kt) {
    const int64_t k0 = static_cast<int64_t>(kt) * kTile;
    // Also the barrier after the previous key tile's readers of ks and dss.
    if (!__syncthreads_or(blk.anyVisible(q0, k0))) continue;
    loadTile<F, HD>(ks, k + kBase, k0, blk.tk, d);
    loadTile<F, HD>(vs, v + kBase, k0, blk.tk, d);
    __syncthreads();
    float s[4][4] = {}, dp[4][4] = {};
    dotTile<HD>(qs, ks, s);
    dotTile<HD>(dos, vs, dp);
    gradTiles(s, dp, rowLse, rowDs, q0, k0, blk, scale, nullptr, dss);
    __syncthreads();
    productTile<HD, false>(dss, ks, gq);
  }
  storeRows<F, HD>(dq + qBase, gq, q0, blk.tq, d);
}

// Dynamic shared memory of each kernel: [kTile, HD + 1] operand tiles and 64 × 65 score tiles.
constexpr uint64_t sharedBytes(int hd, int operandTiles, int scoreTiles) {
  return (static_cast<uint64_t>(operandTiles) * kTile * (hd + 1) +
          static_cast<uint64_t>(scoreTiles) * kTile * kScoreLd) *
         sizeof(float);
}
constexpr uint64_t forwardBytes(int hd) { return sharedBytes(hd, 3, 1); }
constexpr uint64_t keyValueBytes(int hd) { return sharedBytes(hd, 4, 2); }
constexpr uint64_t queryBytes(int hd) { return sharedBytes(hd, 4, 1); }

// The tile width for head dimension d: 32, 64 or 128; 0 when the kernels do not take d.
int headTile(int64_t d) {
  if (d < 1 || d > kFlashMaxHeadDim) return 0;
  return d <= 32 ? 32 : d <= 64 ? 64 : 128;
}

// Launches `kernel` on `blocks` blocks with `bytes` of dynamic shared memory, which a kernel must
// opt in to above 48 KiB. The opt-in belongs to one function (each template instantiation its
// own) on one device, so it is set on every launch, for the very kernel launched: cheap, and
// right whichever device is current.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), uint64_t bytes, int64_t blocks, cudaStream_t stream,
                   Args... args) {
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // reported here; not left for the next launch to find
    return e;
  }
  kernel<<<static_cast<unsigned>(blocks), kFlashThreads, bytes, stream>>>(args...);
  return cudaGetLastError();
}

// The query and key tiles of a step, or zeros when it cannot be launched: a d the kernels do
// not take, or more (slice, tile) blocks than a grid holds.
struct Tiles {
  int query = 0, key = 0;
};

Tiles tilesFor(int64_t slices, const Blocks& blk, int64_t d) {
  const int64_t query = (blk.tq + kTile - 1) / kTile, key = (blk.tk + kTile - 1) / kTile;
  if (headTile(d) == 0 || slices < 1 || blk.tq < 1 || blk.tk < 1 ||
      std::max(query, key) > INT_MAX / slices)
    return {};
  return {static_cast<int>(query), static_cast<int>(key)};
}

template <Float F, int HD>
cudaError_t forward(const void* q, const void* k, const void* v, void* out, float* lse,
                    int64_t slices, const Blocks& blk, int d, float scale, Tiles tiles,
                    cudaStream_t stream) {
  using E = Elem<F>;
  return launch(forwardKernel<F, HD>, forwardBytes(HD), slices * tiles.query, stream,
                static_cast<const E*>(q), static_cast<const E*>(k), static_cast<const E*>(v),
                static_cast<E*>(out), lse, slices, blk, d, scale, tiles.query, tiles.key);
}

template <Float F, int HD>
cudaError_t backward(const void* dout, const void* q, const void* k, const void* v, const void* out,
                     const float* lse, void* dq, void* dk, void* dv, float* rowD, int64_t slices,
                     const Blocks& blk, int d, float scale, Tiles tiles, cudaStream_t stream) {
  using E = Elem<F>;
  const E *doutT = static_cast<const E*>(dout), *qT = static_cast<const E*>(q),
          *kT = static_cast<const E*>(k), *vT = static_cast<const E*>(v);
  cudaError_t e = launch(rowDotKernel<F>, 0, blocksFor(slices * blk.tq, kFlashThreads), stream,
                         doutT, static_cast<const E*>(out), rowD, slices * blk.tq, d);
  if (e == cudaSuccess)
    e = launch(keyValueGradKernel<F, HD>, keyValueBytes(HD), slices / blk.group * tiles.key, stream,
               doutT, qT, kT, vT, lse, rowD, static_cast<E*>(dk), static_cast<E*>(dv),
               slices / blk.group, blk, d, scale, tiles.query);
  if (e == cudaSuccess)
    e = launch(queryGradKernel<F, HD>, queryBytes(HD), slices * tiles.query, stream, doutT, qT, kT,
               vT, lse, rowD, static_cast<E*>(dq), slices, blk, d, scale, tiles.query, tiles.key);
  return e;
}

template <Float F>
cudaError_t forwardOf(const void* q, const void* k, const void* v, void* out, float* lse,
                      int64_t slices, const Blocks& blk, int64_t d, float scale, Tiles tiles,
                      cudaStream_t stream) {
  const int di = static_cast<int>(d);
  switch (headTile(d)) {
    case 32: return forward<F, 32>(q, k, v, out, lse, slices, blk, di, scale, tiles, stream);
    case 64: return forward<F, 64>(q, k, v, out, lse, slices, blk, di, scale, tiles, stream);
    default: return forward<F, 128>(q, k, v, out, lse, slices, blk, di, scale, tiles, stream);
  }
}

template <Float F>
cudaError_t backwardOf(const void* dout, const void* q, const void* k, const void* v,
                       const void* out, const float* lse, void* dq, void* dk, void* dv, float* rowD,
                       int64_t slices, const Blocks& blk, int64_t d, float scale, Tiles tiles,
                       cudaStream_t stream) {
  const int di = static_cast<int>(d);
  switch (headTile(d)) {
    case 32:
      return backward<F, 32>(dout, q, k, v, out, lse, dq, dk, dv, rowD, slices, blk, di, scale,
                             tiles, stream);
    case 64:
      return backward<F, 64>(dout, q, k, v, out, lse, dq, dk, dv, rowD, slices, blk, di, scale,
                             tiles, stream);
    default:
      return backward<F, 128>(dout, q, k, v, out, lse, dq, dk, dv, rowD, slices, blk, di, scale,
                              tiles, stream);
  }
}

Blocks blocksOf(int64_t t, int64_t tk, int64_t group, const AttentionPositions& at) {
  Blocks blk;
  blk.tq = t;
  blk.tk = tk;
  blk.group = group;
  blk.at = at;
  if (blk.at.length == 0) blk.at.length = tk;
  blk.plain = t == tk && at.plain();
  return blk;
}

}  // namespace

uint64_t flashAttentionSharedBytes(int64_t d) {
  const int hd = headTile(d);
  if (hd == 0) return 0;
  return std::max({forwardBytes(hd), keyValueBytes(hd), queryBytes(hd)});
}

cudaError_t causalAttention(Float type, const void* q, const void* k, const void* v, void* out,
                            float* lse, int64_t slices, int64_t t, int64_t tk, int64_t d,
                            float scale, const AttentionPositions& at, cudaStream_t stream,
                            int64_t group) {
  if (slices == 0 || t == 0) return cudaGetLastError();
  if (group < 1 || slices % group != 0) return cudaErrorInvalidValue;
  const Blocks blk = blocksOf(t, tk, group, at);
  const Tiles tiles = tilesFor(slices, blk, d);
  if (tiles.query == 0) return cudaErrorInvalidValue;
  switch (type) {
    case Float::kF32:
      return forwardOf<Float::kF32>(q, k, v, out, lse, slices, blk, d, scale, tiles, stream);
    case Float::kBF16:
      return forwardOf<Float::kBF16>(q, k, v, out, lse, slices, blk, d, scale, tiles, stream);
    case Float::kF16:
      return forwardOf<Float::kF16>(q, k, v, out, lse, slices, blk, d, scale, tiles, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t causalAttentionGrad(Float type, const void* dout, const void* q, const void* k,
                                const void* v, const void* out, const float* lse, void* dq,
                                void* dk, void* dv, int64_t slices, int64_t t, int64_t tk,
                                int64_t d, float scale, const AttentionPositions& at, void* scratch,
                                cudaStream_t stream, int64_t group) {
  if (slices == 0 || t == 0) return cudaGetLastError();
  if (group < 1 || slices % group != 0) return cudaErrorInvalidValue;
  const Blocks blk = blocksOf(t, tk, group, at);
  const Tiles tiles = tilesFor(slices, blk, d);
  if (tiles.query == 0) return cudaErrorInvalidValue;
  float* rowD = static_cast<float*>(scratch);
  switch (type) {
    case Float::kF32:
      return backwardOf<Float::kF32>(dout, q, k, v, out, lse, dq, dk, dv, rowD, slices, blk, d,
                                     scale, tiles, stream);
    case Float::kBF16:
      return backwardOf<Float::kBF16>(dout, q, k, v, out, lse, dq, dk, dv, rowD, slices, blk, d,
                                      scale, tiles, stream);
    case Float::kF16:
      return backwardOf<Float::kF16>(dout, q, k, v, out, lse, dq, dk, dv, rowD, slices, blk, d,
                                     scale, tiles, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace dtc::cuda::kernels
