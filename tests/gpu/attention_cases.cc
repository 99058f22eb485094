// causal_attention and causal_attention_grad on CUDA (the flash-attention kernels; for 16-bit
// operands also the GEMM path, see below) against the CPU kernels:
// [2, 3, T, D] for T in {1, 17, 64, 100, 257} (one key, part of a tile, one whole tile, a ragged
// second tile, five tiles) and D in {8, 32, 64, 80, 128} (each register tile width, filled and
// padded), then peaky scores, other ranks, a long sequence, the contracts and the head-dimension
// limit. fp32 tolerances: 1e-5 on out and lse, 1e-4 on the gradients (the harness's max |cuda −
// cpu| / max |cpu|, printed per case); the harness also reruns every case and requires the same
// bits (the kernels use no atomics).
//
// Mixed precision: bf16 and f16 q, k, v, out, dout, dq, dk, dv with an f32 lse, for T in
// {17, 64, 257} × D in {32, 64, 128}, one key, peaky scores with a padded D, a long sequence,
// and D = 160, on each of the CUDA binder's paths (cuda_attention_table.cc): the default, cuDNN's
// fused attention where libcudnn loads (its deterministic backward, then its default one), else
// cuBLAS GEMMs over [T, T] scores in scratch (DTC_CUDA_ATTENTION=gemm; every 16-bit case here
// fits its budget), and the flash kernels (DTC_CUDA_ATTENTION=flash), which refuse D = 160.
// cuDNN rounds P and dS to the 16-bit type before their products, as the GEMM path does, and is
// held to the GEMM path's tolerances.
// Flash kernels: both backends widen the same 16-bit inputs exactly, run their f32 math and round
// each output once (to nearest even), so a 16-bit output is off by at most the f32 difference
// plus one ulp of the type: |r(a) − r(b)| ≤ |a − b| + 2^-7 (bf16) or 2^-10 (f16) of the largest
// value, under 1e-2 (bf16) and 2e-3 (f16) given the f32 bounds above.
// GEMM path: the same, plus P and dS rounded to the type before the products that read them
// (FlashAttention-2's roundings): each product term p·v, p·dout, ds·k, ds·q carries one more
// relative rounding, at most u = 2^-8 (bf16) or 2^-11 (f16). For out that adds at most u·Σ_j
// p_ij |v_j| ≤ u·max|v| (p ≥ 0 sums to 1), and max|out| ≈ max|v| here (row 0's out is v_0, its
// p = 1 exact): a worst case of 2^-7 + 2^-8 ≈ 1.2e-2 (bf16) and 2^-10 + 2^-11 ≈ 1.5e-3 (f16).
// The gradients' terms have mixed signs, so their bound is loose. In practice the roundings are
// independent, a random walk far below u·Σ|terms|: an emulation of the path on the CPU (f32 sums
// in order, these roundings) over these shapes gave at most 6.2e-3 (bf16, about one output ulp
// plus the roundings) and 9.3e-4 (f16) against the CPU kernels, 1.0e-3 and 2.7e-4 without the P
// and dS roundings. So the 1e-2 and 2e-3 bounds are kept (margins of about 1.6 and 2; the f16
// one need not widen); cuBLAS's summation order moves the f32 sums by ~1e-7 relative. A wrong
// transpose or stride is off by O(1). lse is f32 from identical inputs and would meet the f32
// cases' 1e-5, but the harness holds a case's outputs to one tolerance. The per-element ulp bound
// is only reported: out and the gradients are sums of mixed signs, so a tiny element may be
// several of its own ulps apart.
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"
#include "harness.h"
#include "support/thread_pool.h"

namespace dtc::gputest {
namespace {

const std::vector<int64_t> kLengths = {1, 17, 64, 100, 257};
const std::vector<int64_t> kHeadDims = {8, 32, 64, 80, 128};
constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;

std::string describe(const Shape& shape, float range) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]" + (range != 2.0f ? " peaky" : "");
}

// The per-query shape of lse: the shape without D.
Shape rowsOf(const Shape& shape) { return Shape(shape.begin(), shape.end() - 1); }

double scaleFor(const Shape& shape) { return 1.0 / std::sqrt(static_cast<double>(shape.back())); }

// q and k uniform in [-range, range): the scaled scores' spread grows as range² (2: about 1.3,
// near-uniform softmax; 4: about 5, peaky, so the running max moves between key tiles).
Case forwardCase(const Shape& shape, float range) {
  return {"attention " + describe(shape, range),
          "causal_attention",
          {floatAttr("scale", scaleFor(shape))},
          {f32(shape, -range, range), f32(shape, -range, range), f32(shape)},
          {out(shape), out(rowsOf(shape))},
          1e-5};
}

// The same with 16-bit q, k, v and out (the values rounded to t), lse f32.
Case lowForwardCase(DType t, const Shape& shape, float range) {
  Case c{"attention" + typeLabel(t) + " " + describe(shape, range),
         "causal_attention",
         {floatAttr("scale", scaleFor(shape))},
         {lowp(t, shape, -range, range), lowp(t, shape, -range, range), lowp(t, shape)},
         {outAs(t, shape), out(rowsOf(shape))}};
  c.tolerance = lowTolerance(t);
  c.maxUlps = -1;
  return c;
}

// The gradient at a consistent point: out and lse are the CPU forward's on the same q, k, v
// (random ones would give probabilities that do not sum to 1), so every input is given. For a
// 16-bit type, dout, q, k, v are rounded to it before the forward and out after it, as a
// bf16/f16 training step hands them over; lse stays f32.
Case gradCase(const Shape& shape, float range, uint64_t seed, DType type = kF32) {
  const int64_t t = shape[shape.size() - 2], d = shape.back();
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  const int64_t slices = n / (t * d);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-range, range), unit(-1, 1);
  std::vector<float> dout(n), q(n), k(n), v(n), o(n), lse(slices * t);
  for (float& x : q) x = wide(rng);
  for (float& x : k) x = wide(rng);
  for (float& x : v) x = unit(rng);
  for (float& x : dout) x = unit(rng);
  for (std::vector<float>* x : {&dout, &q, &k, &v})
    for (float& e : *x) e = roundTo(type, e);
  ThreadPool pool(2);
  const double scale = scaleFor(shape);
  cpu::causalAttention(q.data(), k.data(), v.data(), o.data(), lse.data(), slices, t, d,
                       static_cast<float>(scale), pool);
  for (float& e : o) e = roundTo(type, e);
  Case c{"attention grad" + typeLabel(type) + " " + describe(shape, range),
         "causal_attention_grad",
         {floatAttr("scale", scale)},
         {givenAs(type, shape, dout), givenAs(type, shape, q), givenAs(type, shape, k),
          givenAs(type, shape, v), givenAs(type, shape, o), given(rowsOf(shape), lse)},
         {outAs(type, shape), outAs(type, shape), outAs(type, shape)},
         1e-4};
  if (type != kF32) {
    c.tolerance = lowTolerance(type);
    c.maxUlps = -1;
  }
  return c;
}

constexpr const char* kSwitch = "DTC_CUDA_ATTENTION";

// The CUDA binder's paths for 16-bit operands: the default (cuDNN where libcudnn loads and takes
// the step, else the GEMM path), with cuDNN's deterministic backward and then its default one,
// whose bits may vary between runs; then dtc's GEMM path and flash kernels, forced.
struct LowPath {
  const char* attention;  // DTC_CUDA_ATTENTION (null: the default)
  bool deterministic;     // DTC_CUDNN_DETERMINISTIC=1, and a rerun must give the same bits
  const char* label;
};
const LowPath kLowPaths[] = {{nullptr, true, ""},
                             {nullptr, false, " nondeterministic"},
                             {"gemm", true, " gemm"},
                             {"flash", true, " flash"}};

}  // namespace

void runAttentionCases(Harness& h) {
  uint64_t seed = 1;
  for (int64_t t : kLengths)
    for (int64_t d : kHeadDims) h.run(forwardCase({2, 3, t, d}, 2.0f));
  for (int64_t t : kLengths)
    for (int64_t d : kHeadDims) h.run(gradCase({2, 3, t, d}, 2.0f, seed++));
  // Peaky scores, other ranks ([T, D] is one slice), and 16 key tiles.
  struct Extra {
    Shape shape;
    float range;
  };
  for (const Extra& e :
       {Extra{{2, 3, 257, 64}, 4.0f}, Extra{{1, 2, 100, 128}, 4.0f}, Extra{{1, 3, 77, 80}, 4.0f},
        Extra{{300, 24}, 2.0f}, Extra{{5, 37, 16}, 2.0f}, Extra{{1, 2, 1000, 64}, 2.0f}}) {
    h.run(forwardCase(e.shape, e.range));
    h.run(gradCase(e.shape, e.range, seed++));
  }

  // Mixed precision on both paths: each register tile width, part of a tile to five tiles, one
  // key (where dp − D must come out exactly 0), peaky scores with a padded D, 16 key tiles
  // (rows longer than a row pass's block), and D = 160, which only the GEMM path takes.
  ScopedEnv path(kSwitch), deterministic("DTC_CUDNN_DETERMINISTIC");
  const Shape beyondFlash = {1, 2, 8, 160};
  for (const LowPath& p : kLowPaths) {
    path.set(p.attention);
    deterministic.set(p.deterministic ? "1" : nullptr);
    const bool flash = p.attention && std::string(p.attention) == "flash";
    auto check = [&](Case c) {
      c.label += p.label;
      c.repeatable = p.deterministic;
      h.run(c);
    };
    for (DType type : {kBF16, kF16}) {
      for (int64_t t : {17, 64, 257})
        for (int64_t d : {32, 64, 128}) {
          check(lowForwardCase(type, {2, 3, t, d}, 2.0f));
          check(gradCase({2, 3, t, d}, 2.0f, seed++, type));
        }
      for (const Extra& e : {Extra{{2, 3, 1, 64}, 2.0f}, Extra{{1, 2, 100, 80}, 4.0f},
                             Extra{{1, 2, 1000, 64}, 2.0f}}) {
        check(lowForwardCase(type, e.shape, e.range));
        check(gradCase(e.shape, e.range, seed++, type));
      }
      if (!flash) {
        check(lowForwardCase(type, beyondFlash, 2.0f));
        check(gradCase(beyondFlash, 2.0f, seed++, type));
      }
    }
  }
  deterministic.set(nullptr);
  // The flash kernels' head-dimension limit, for 16-bit operands when forced onto them.
  path.set("flash");
  const Attr scale = floatAttr("scale", 0.5);
  h.expectBindError({"attention bf16 D=160 flash",
                     "causal_attention",
                     {scale},
                     {lowp(kBF16, beyondFlash), lowp(kBF16, beyondFlash), lowp(kBF16, beyondFlash)},
                     {outAs(kBF16, beyondFlash), out({1, 2, 8})}},
                    "head dimension 160 is above the CUDA flash-attention kernels' limit of 128");
  h.expectBindError(
      {"attention grad f16 D=160 flash",
       "causal_attention_grad",
       {scale},
       {lowp(kF16, beyondFlash), lowp(kF16, beyondFlash), lowp(kF16, beyondFlash),
        lowp(kF16, beyondFlash), lowp(kF16, beyondFlash), f32({1, 2, 8})},
       {outAs(kF16, beyondFlash), outAs(kF16, beyondFlash), outAs(kF16, beyondFlash)}},
      "head dimension 160 is above the CUDA flash-attention kernels' limit of 128");
  path.set("fused");
  h.expectBindError({"attention bad DTC_CUDA_ATTENTION",
                     "causal_attention",
                     {scale},
                     {lowp(kBF16, {2, 5, 4}), lowp(kBF16, {2, 5, 4}), lowp(kBF16, {2, 5, 4})},
                     {outAs(kBF16, {2, 5, 4}), out({2, 5})}},
                    "DTC_CUDA_ATTENTION is 'fused': expected auto|cudnn|flash|gemm");
  path.set(nullptr);

  // Malformed steps: both backends refuse them at bind time with the same message.
  const Shape s = {2, 5, 4};
  h.expectSameBindError({"bad attention lse",
                         "causal_attention",
                         {scale},
                         {f32(s), f32(s), f32(s)},
                         {out(s), out({2, 4})}});
  h.expectSameBindError({"bad attention v",
                         "causal_attention",
                         {scale},
                         {f32(s), f32(s), f32({2, 5, 3})},
                         {out(s), out({2, 5})}});
  h.expectSameBindError({"bad attention rank",
                         "causal_attention",
                         {scale},
                         {f32({8}), f32({8}), f32({8})},
                         {out({8}), out({1})}});
  h.expectSameBindError({"bad attention grad lse",
                         "causal_attention_grad",
                         {scale},
                         {f32(s), f32(s), f32(s), f32(s), f32(s), f32({2, 4})},
                         {out(s), out(s), out(s)}});
  h.expectSameBindError({"bad attention grad dk",
                         "causal_attention_grad",
                         {scale},
                         {f32(s), f32(s), f32(s), f32(s), f32(s), f32({2, 5})},
                         {out(s), out({2, 5, 3}), out(s)}});
  // Two 16-bit types: both backends refuse it with the CPU's words.
  h.expectSameBindError({"bad attention bf16/f16",
                         "causal_attention",
                         {scale},
                         {lowp(kBF16, s), lowp(kF16, s), lowp(kBF16, s)},
                         {outAs(kBF16, s), out({2, 5})}});
  h.expectSameBindError(
      {"bad attention grad f16/bf16",
       "causal_attention_grad",
       {scale},
       {lowp(kF16, s), lowp(kF16, s), lowp(kF16, s), lowp(kF16, s), lowp(kF16, s), f32({2, 5})},
       {outAs(kF16, s), outAs(kBF16, s), outAs(kF16, s)}});
  // Mixes the CPU's widened path takes and the kernels do not: a 16-bit type beside f32 operands
  // other than lse, or a 16-bit lse.
  h.expectBindError({"attention bf16 with f32 out",
                     "causal_attention",
                     {scale},
                     {lowp(kBF16, s), lowp(kBF16, s), lowp(kBF16, s)},
                     {out(s), out({2, 5})}},
                    "operands must share one element type, got bfloat16 and float32");
  h.expectBindError({"attention f16 with f32 k",
                     "causal_attention",
                     {scale},
                     {lowp(kF16, s), f32(s), lowp(kF16, s)},
                     {outAs(kF16, s), out({2, 5})}},
                    "operands must share one element type, got float16 and float32");
  h.expectBindError({"attention bf16 lse",
                     "causal_attention",
                     {scale},
                     {lowp(kBF16, s), lowp(kBF16, s), lowp(kBF16, s)},
                     {outAs(kBF16, s), outAs(kBF16, {2, 5})}},
                    "lse must be float32 beside bfloat16 operands, got bfloat16");
  h.expectBindError({"attention grad f16 lse",
                     "causal_attention_grad",
                     {scale},
                     {lowp(kF16, s), lowp(kF16, s), lowp(kF16, s), lowp(kF16, s), lowp(kF16, s),
                      lowp(kF16, {2, 5})},
                     {outAs(kF16, s), outAs(kF16, s), outAs(kF16, s)}},
                    "lse must be float32 beside float16 operands, got float16");
  // A head dimension the CPU takes and the kernels do not: a bind error naming the limit.
  const Shape wide = {1, 2, 8, 160};
  h.expectBindError({"attention D=160",
                     "causal_attention",
                     {scale},
                     {f32(wide), f32(wide), f32(wide)},
                     {out(wide), out({1, 2, 8})}},
                    "head dimension 160 is above the CUDA flash-attention kernels' limit of 128");
  h.expectBindError({"attention grad D=160",
                     "causal_attention_grad",
                     {scale},
                     {f32(wide), f32(wide), f32(wide), f32(wide), f32(wide), f32({1, 2, 8})},
                     {out(wide), out(wide), out(wide)}},
                    "head dimension 160 is above the CUDA flash-attention kernels' limit of 128");
}

}  // namespace dtc::gputest
