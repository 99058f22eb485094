// causal_attention_qkv and its gradient (attention on the fused projection qkv [B, T, 3·H·D], or
// on three, q [B, T, H·D] with k and v of Hk heads: ops/packed_attention.h) on CUDA against the
// CPU kernels: f32, bf16 and f16, heads of D in
// {32, 64, 80}, one to several key tiles, on each CUDA path (cuda_packed_attention_table.cc): the
// default (cuDNN's fused attention for 16-bit operands where libcudnn loads; its deterministic
// backward, then its default one, whose bits may vary between runs), then dtc's GEMM path and
// flash kernels on unpacked heads; then the contracts. Tolerances as attention_cases.cc's GEMM
// path's: cuDNN, like it, rounds P and dS to the 16-bit type before their products.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"
#include "harness.h"
#include "ops/attention_positions.h"
#include "support/thread_pool.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;

struct Dims {
  int64_t b, t, h, d;
  int64_t c() const { return h * d; }
  std::string label() const {
    return "[" + std::to_string(b) + "," + std::to_string(t) + "," + std::to_string(h) + "x" +
           std::to_string(d) + "]";
  }
};

double tolerance(DType t, bool grad) {
  return t == kBF16 ? 1e-2 : t == kF16 ? 2e-3 : grad ? 1e-4 : 1e-5;
}

Case forwardCase(const Dims& a, DType type) {
  Case c{
      "packed attention" + typeLabel(type) + " " + a.label(),
      "causal_attention_qkv",
      {floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(a.d))), intAttr("heads", a.h)},
      {type == kF32 ? f32({a.b, a.t, 3 * a.c()}, -2, 2) : lowp(type, {a.b, a.t, 3 * a.c()}, -2, 2)},
      {outAs(type, {a.b, a.t, a.c()}), out({a.b, a.h, a.t})}};
  c.tolerance = tolerance(type, false);
  c.maxUlps = type == kF32 ? 1 : -1;
  return c;
}

// The gradient at a consistent point: out and lse are the CPU forward's on the heads of qkv.
Case gradCase(const Dims& a, DType type, uint64_t seed) {
  const int64_t rows = a.b * a.t, c = a.c(), block = a.b * a.h * a.t * a.d;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-2, 2), unit(-1, 1);
  std::vector<float> qkv(rows * 3 * c), dout(rows * c), out(rows * c), lse(a.b * a.h * a.t);
  for (float& x : qkv) x = roundTo(type, wide(rng));
  for (float& x : dout) x = roundTo(type, unit(rng));
  // The heads of part p (q, k, v) as [B, H, T, D].
  std::vector<float> heads(3 * block), o(block);
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t b = 0; b < a.b; ++b)
      for (int64_t h = 0; h < a.h; ++h)
        for (int64_t t = 0; t < a.t; ++t)
          for (int64_t j = 0; j < a.d; ++j)
            heads[p * block + ((b * a.h + h) * a.t + t) * a.d + j] =
                qkv[(b * a.t + t) * 3 * c + p * c + h * a.d + j];
  ThreadPool pool(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(a.d));
  cpu::causalAttention(heads.data(), heads.data() + block, heads.data() + 2 * block, o.data(),
                       lse.data(), a.b * a.h, a.t, a.d, static_cast<float>(scale), pool);
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t t = 0; t < a.t; ++t)
        for (int64_t j = 0; j < a.d; ++j)
          out[(b * a.t + t) * c + h * a.d + j] =
              roundTo(type, o[((b * a.h + h) * a.t + t) * a.d + j]);
  Case k{"packed attention grad" + typeLabel(type) + " " + a.label(),
         "causal_attention_qkv_grad",
         {floatAttr("scale", scale), intAttr("heads", a.h)},
         {givenAs(type, {a.b, a.t, c}, dout), givenAs(type, {a.b, a.t, 3 * c}, qkv),
          givenAs(type, {a.b, a.t, c}, out), given({a.b, a.h, a.t}, lse)},
         {outAs(type, {a.b, a.t, 3 * c})}};
  k.tolerance = tolerance(type, true);
  k.maxUlps = -1;
  return k;
}

// Three projections, k and v of `kvHeads` heads (grouped-query attention when fewer than h).
Case projectionsForwardCase(const Dims& a, int64_t kvHeads, DType type) {
  const Shape q{a.b, a.t, a.c()}, kv{a.b, a.t, kvHeads * a.d};
  auto operand = [&](const Shape& s) {
    return type == kF32 ? f32(s, -2, 2) : lowp(type, s, -2, 2);
  };
  Case c{"attention on projections" + typeLabel(type) + " " + a.label() + " kv " +
             std::to_string(kvHeads),
         "causal_attention_qkv",
         {floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(a.d))), intAttr("heads", a.h)},
         {operand(q), operand(kv), operand(kv)},
         {outAs(type, q), out({a.b, a.h, a.t})}};
  c.tolerance = tolerance(type, false);
  c.maxUlps = type == kF32 ? 1 : -1;
  return c;
}

// The gradient at a consistent point: out and lse the CPU forward's on the projections' heads.
Case projectionsGradCase(const Dims& a, int64_t kvHeads, DType type, uint64_t seed) {
  const int64_t rows = a.b * a.t, c = a.c(), ck = kvHeads * a.d;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-2, 2), unit(-1, 1);
  std::vector<float> q(rows * c), k(rows * ck), v(rows * ck), dout(rows * c), out(rows * c),
      lse(a.b * a.h * a.t);
  for (auto* x : {&q, &k, &v})
    for (float& e : *x) e = roundTo(type, wide(rng));
  for (float& e : dout) e = roundTo(type, unit(rng));
  // [B, T, heads, D] rows as [B, heads, T, D] blocks, and back.
  auto heads = [&](const std::vector<float>& rowsOf, int64_t n) {
    std::vector<float> blocks(rowsOf.size());
    for (int64_t b = 0; b < a.b; ++b)
      for (int64_t h = 0; h < n; ++h)
        for (int64_t t = 0; t < a.t; ++t)
          for (int64_t j = 0; j < a.d; ++j)
            blocks[((b * n + h) * a.t + t) * a.d + j] = rowsOf[((b * a.t + t) * n + h) * a.d + j];
    return blocks;
  };
  const std::vector<float> qh = heads(q, a.h), kh = heads(k, kvHeads), vh = heads(v, kvHeads);
  std::vector<float> o(qh.size());
  ThreadPool pool(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(a.d));
  cpu::causalAttention(qh.data(), kh.data(), vh.data(), o.data(), lse.data(), a.b * a.h, a.t, a.t,
                       a.d, static_cast<float>(scale), AttentionPositions{}, pool, a.h / kvHeads);
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t t = 0; t < a.t; ++t)
        for (int64_t j = 0; j < a.d; ++j)
          out[((b * a.t + t) * a.h + h) * a.d + j] =
              roundTo(type, o[((b * a.h + h) * a.t + t) * a.d + j]);
  const Shape qs{a.b, a.t, c}, kvs{a.b, a.t, ck};
  Case g{"attention on projections grad" + typeLabel(type) + " " + a.label() + " kv " +
             std::to_string(kvHeads),
         "causal_attention_qkv_grad",
         {floatAttr("scale", scale), intAttr("heads", a.h)},
         {givenAs(type, qs, dout), givenAs(type, qs, q), givenAs(type, kvs, k),
          givenAs(type, kvs, v), givenAs(type, qs, out), given({a.b, a.h, a.t}, lse)},
         {outAs(type, qs), outAs(type, kvs), outAs(type, kvs)}};
  g.tolerance = tolerance(type, true);
  g.maxUlps = -1;
  return g;
}

}  // namespace

void runPackedAttentionCases(Harness& h) {
  const std::vector<Dims> shapes = {
      {2, 17, 3, 32}, {1, 64, 2, 64}, {2, 100, 2, 80}, {1, 257, 4, 64}};
  uint64_t seed = 101;
  ScopedEnv path("DTC_CUDA_ATTENTION"), deterministic("DTC_CUDNN_DETERMINISTIC");
  struct Path {
    const char* attention;  // DTC_CUDA_ATTENTION (null: the default)
    bool deterministic;
    const char* label;
  };
  for (const Path& p : {Path{nullptr, true, ""}, Path{nullptr, false, " nondeterministic"},
                        Path{"gemm", true, " gemm"}, Path{"flash", true, " flash"}}) {
    path.set(p.attention);
    deterministic.set(p.deterministic ? "1" : nullptr);
    for (DType type : {kF32, kBF16, kF16}) {
      // The GEMM path and cuDNN take 16-bit operands only (f32 runs on the flash kernels).
      if (type == kF32 && p.attention == nullptr && !p.deterministic) continue;
      if (type == kF32 && p.attention && std::string(p.attention) == "gemm") continue;
      for (const Dims& a : shapes) {
        Case f = forwardCase(a, type), g = gradCase(a, type, seed++);
        f.label += p.label, g.label += p.label;
        g.repeatable = p.deterministic;
        h.run(f);
        h.run(g);
      }
      // Llama's three projections: 8 query heads over 2 (grouped) and over 8, an odd length.
      for (int64_t kvHeads : {2, 8}) {
        const Dims a{2, 67, 8, 64};
        Case f = projectionsForwardCase(a, kvHeads, type),
             g = projectionsGradCase(a, kvHeads, type, seed++);
        f.label += p.label, g.label += p.label;
        g.repeatable = p.deterministic;
        h.run(f);
        h.run(g);
      }
    }
  }
  path.set(nullptr);
  deterministic.set(nullptr);
  // DTC_CUDA_ATTENTION=cudnn refuses float32 operands, by name.
  path.set("cudnn");
  h.expectBindError(forwardCase({1, 8, 2, 32}, kF32),
                    "DTC_CUDA_ATTENTION=cudnn: cuDNN's fused attention takes bf16/f16 operands, "
                    "not float32");
  path.set(nullptr);
  // Malformed steps: both backends refuse them at bind time with the same message.
  const Attr scale = floatAttr("scale", 0.5);
  h.expectSameBindError({"bad packed attention heads",
                         "causal_attention_qkv",
                         {scale, intAttr("heads", 5)},
                         {f32({2, 4, 24})},
                         {out({2, 4, 8}), out({2, 5, 4})}});
  h.expectSameBindError({"bad packed attention lse",
                         "causal_attention_qkv",
                         {scale, intAttr("heads", 2)},
                         {f32({2, 4, 24})},
                         {out({2, 4, 8}), out({2, 4, 2})}});
  h.expectSameBindError({"bad packed attention grad dqkv",
                         "causal_attention_qkv_grad",
                         {scale, intAttr("heads", 2)},
                         {f32({2, 4, 8}), f32({2, 4, 24}), f32({2, 4, 8}), f32({2, 2, 4})},
                         {out({2, 4, 8})}});
  h.expectSameBindError({"bad attention on projections kv heads",
                         "causal_attention_qkv",
                         {scale, intAttr("heads", 4)},
                         {f32({2, 4, 32}), f32({2, 4, 24}), f32({2, 4, 24})},
                         {out({2, 4, 32}), out({2, 4, 4})}});
  h.expectSameBindError({"bad attention on projections grad dk",
                         "causal_attention_qkv_grad",
                         {scale, intAttr("heads", 4)},
                         {f32({2, 4, 32}), f32({2, 4, 32}), f32({2, 4, 16}), f32({2, 4, 16}),
                          f32({2, 4, 32}), f32({2, 4, 4})},
                         {out({2, 4, 32}), out({2, 4, 32}), out({2, 4, 16})}});
}

}  // namespace dtc::gputest
