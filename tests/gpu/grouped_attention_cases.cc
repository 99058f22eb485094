// Grouped-query attention on CUDA against the CPU kernels: q [B, H, T, D] against k and v
// [B, Hk, T, D] with Hk dividing H (Llama 3's 32 query heads over 8 key/value heads, Qwen2's 7
// over 1, a group of 2, a group of 1 for the plain path's sake), on every path of the binder: the
// flash kernels (f32, and 16-bit forced onto them), the GEMM path (forced), whose GEMMs stack a
// group's query heads as the rows of one product, and the default for 16-bit operands, cuDNN's
// fused attention where libcudnn loads (k and v with their own heads; its deterministic backward,
// then its default one, whose bits may vary between runs). Odd lengths (part of a tile, ragged
// tiles) and each register tile width. Tolerances as attention_cases.cc's (1e-5 / 1e-4 f32; 1e-2
// bf16, 2e-3 f16): a group changes which key/value slice a query reads and the order of the dk/dv
// sums, not the roundings. Every case but cuDNN's default backward is rerun by the harness and
// must give the same bits: dtc's kernels sum over a group in a fixed order, no atomics.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"
#include "harness.h"
#include "support/thread_pool.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;

struct Grouped {
  int64_t batch, heads, kvHeads, t, d;
  Shape q() const { return {batch, heads, t, d}; }
  Shape kv() const { return {batch, kvHeads, t, d}; }
  Shape rows() const { return {batch, heads, t}; }
  std::string label(DType type, const char* what) const {
    return std::string(what) + typeLabel(type) + " [" + std::to_string(batch) + "," +
           std::to_string(heads) + "/" + std::to_string(kvHeads) + "," + std::to_string(t) + "," +
           std::to_string(d) + "]";
  }
};

Case forwardCase(const Grouped& g, DType type) {
  const Attr scale = floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(g.d)));
  Case c{g.label(type, "grouped attention"),
         "causal_attention",
         {scale},
         {lowp(type, g.q(), -2, 2), lowp(type, g.kv(), -2, 2), lowp(type, g.kv())},
         {outAs(type, g.q()), out(g.rows())}};
  if (type != kF32) {
    c.tolerance = lowTolerance(type);
    c.maxUlps = -1;
  }
  return c;
}

// At a consistent point: out and lse from the CPU's grouped forward on the same inputs.
Case gradCase(const Grouped& g, DType type, uint64_t seed) {
  const int64_t slices = g.batch * g.heads, n = slices * g.t * g.d,
                nk = g.batch * g.kvHeads * g.t * g.d;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-2, 2), unit(-1, 1);
  std::vector<float> dout(n), q(n), k(nk), v(nk), o(n), lse(slices * g.t);
  for (float& x : q) x = roundTo(type, wide(rng));
  for (float& x : k) x = roundTo(type, wide(rng));
  for (float& x : v) x = roundTo(type, unit(rng));
  for (float& x : dout) x = roundTo(type, unit(rng));
  ThreadPool pool(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(g.d));
  cpu::causalAttention(q.data(), k.data(), v.data(), o.data(), lse.data(), slices, g.t, g.t, g.d,
                       static_cast<float>(scale), AttentionPositions{}, pool, g.heads / g.kvHeads);
  for (float& e : o) e = roundTo(type, e);
  Case c{g.label(type, "grouped attention grad"),
         "causal_attention_grad",
         {floatAttr("scale", scale)},
         {givenAs(type, g.q(), dout), givenAs(type, g.q(), q), givenAs(type, g.kv(), k),
          givenAs(type, g.kv(), v), givenAs(type, g.q(), o), given(g.rows(), lse)},
         {outAs(type, g.q()), outAs(type, g.kv()), outAs(type, g.kv())},
         1e-4};
  if (type != kF32) {
    c.tolerance = lowTolerance(type);
    c.maxUlps = -1;
  }
  return c;
}

}  // namespace

void runGroupedAttentionCases(Harness& h) {
  const Grouped shapes[] = {
      {1, 32, 8, 100, 64},  // Llama 3's grouping, a ragged second tile
      {2, 7, 1, 65, 128},   // Qwen2 0.5B's 14/2 per device: one key/value head
      {2, 6, 3, 17, 32},    // a group of 2, part of a tile
      {1, 4, 4, 129, 80},   // a group of 1: the plain kernels' path
  };
  uint64_t seed = 500;
  for (const Grouped& g : shapes) {
    h.run(forwardCase(g, kF32));
    h.run(gradCase(g, kF32, seed++));
  }
  ScopedEnv path("DTC_CUDA_ATTENTION"), deterministic("DTC_CUDNN_DETERMINISTIC");
  struct Path {
    const char* attention;  // null: the default, cuDNN where it loads
    bool deterministic;
    const char* label;
  };
  for (const Path& p : {Path{nullptr, true, ""}, Path{nullptr, false, " nondeterministic"},
                        Path{"gemm", true, " gemm"}, Path{"flash", true, " flash"}}) {
    path.set(p.attention);
    deterministic.set(p.deterministic ? "1" : nullptr);
    for (DType type : {kBF16, kF16})
      for (const Grouped& g : shapes) {
        Case f = forwardCase(g, type), b = gradCase(g, type, seed++);
        f.label += p.label, b.label += p.label;
        b.repeatable = p.deterministic;
        h.run(f);
        h.run(b);
      }
  }
  path.set(nullptr);
  deterministic.set(nullptr);
  // k with more heads than q, or a count that does not divide q's: both backends refuse alike.
  const Attr scale = floatAttr("scale", 0.5);
  h.expectSameBindError({"bad grouped attention heads",
                         "causal_attention",
                         {scale},
                         {f32({1, 6, 5, 4}), f32({1, 4, 5, 4}), f32({1, 4, 5, 4})},
                         {out({1, 6, 5, 4}), out({1, 6, 5})}});
  h.expectSameBindError({"bad grouped attention grad heads",
                         "causal_attention_grad",
                         {scale},
                         {f32({1, 2, 5, 4}), f32({1, 2, 5, 4}), f32({1, 4, 5, 4}),
                          f32({1, 4, 5, 4}), f32({1, 2, 5, 4}), f32({1, 2, 5})},
                         {out({1, 2, 5, 4}), out({1, 4, 5, 4}), out({1, 4, 5, 4})}});
}

}  // namespace dtc::gputest
