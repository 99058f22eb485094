// The flash-attention kernels (causal_attention, causal_attention_grad) against the CPU kernels:
// [2, 3, T, D] for T in {1, 17, 64, 100, 257} (one key, part of a tile, one whole tile, a ragged
// second tile, five tiles) and D in {8, 32, 64, 80, 128} (each register tile width, filled and
// padded), then peaky scores, other ranks, a long sequence, the contracts and the head-dimension
// limit. fp32 tolerances: 1e-5 on out and lse, 1e-4 on the gradients (the harness's max |cuda −
// cpu| / max |cpu|, printed per case); the harness also reruns every case and requires the same
// bits (the kernels use no atomics).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/transformer_kernels.h"
#include "harness.h"
#include "support/thread_pool.h"

namespace dtc::gputest {
namespace {

const std::vector<int64_t> kLengths = {1, 17, 64, 100, 257};
const std::vector<int64_t> kHeadDims = {8, 32, 64, 80, 128};

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
  return {"attention " + describe(shape, range), "causal_attention", {floatAttr("scale", scaleFor(shape))},
          {f32(shape, -range, range), f32(shape, -range, range), f32(shape)},
          {out(shape), out(rowsOf(shape))}, 1e-5};
}

// The gradient at a consistent point: out and lse are the CPU forward's on the same q, k, v
// (random ones would give probabilities that do not sum to 1), so every input is given.
Case gradCase(const Shape& shape, float range, uint64_t seed) {
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
  ThreadPool pool(2);
  const double scale = scaleFor(shape);
  cpu::causalAttention(q.data(), k.data(), v.data(), o.data(), lse.data(), slices, t, d, static_cast<float>(scale),
                       pool);
  return {"attention grad " + describe(shape, range), "causal_attention_grad", {floatAttr("scale", scale)},
          {given(shape, dout), given(shape, q), given(shape, k), given(shape, v), given(shape, o),
           given(rowsOf(shape), lse)},
          {out(shape), out(shape), out(shape)}, 1e-4};
}

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
  for (const Extra& e : {Extra{{2, 3, 257, 64}, 4.0f}, Extra{{1, 2, 100, 128}, 4.0f}, Extra{{1, 3, 77, 80}, 4.0f},
                         Extra{{300, 24}, 2.0f}, Extra{{5, 37, 16}, 2.0f}, Extra{{1, 2, 1000, 64}, 2.0f}}) {
    h.run(forwardCase(e.shape, e.range));
    h.run(gradCase(e.shape, e.range, seed++));
  }

  // Malformed steps: both backends refuse them at bind time with the same message.
  const Attr scale = floatAttr("scale", 0.5);
  const Shape s = {2, 5, 4};
  h.expectSameBindError({"bad attention lse", "causal_attention", {scale}, {f32(s), f32(s), f32(s)},
                         {out(s), out({2, 4})}});
  h.expectSameBindError({"bad attention v", "causal_attention", {scale}, {f32(s), f32(s), f32({2, 5, 3})},
                         {out(s), out({2, 5})}});
  h.expectSameBindError({"bad attention rank", "causal_attention", {scale}, {f32({8}), f32({8}), f32({8})},
                         {out({8}), out({1})}});
  h.expectSameBindError({"bad attention grad lse", "causal_attention_grad", {scale},
                         {f32(s), f32(s), f32(s), f32(s), f32(s), f32({2, 4})}, {out(s), out(s), out(s)}});
  h.expectSameBindError({"bad attention grad dk", "causal_attention_grad", {scale},
                         {f32(s), f32(s), f32(s), f32(s), f32(s), f32({2, 5})}, {out(s), out({2, 5, 3}), out(s)}});
  // A head dimension the CPU takes and the kernels do not: a bind error naming the limit.
  const Shape wide = {1, 2, 8, 160};
  h.expectBindError({"attention D=160", "causal_attention", {scale}, {f32(wide), f32(wide), f32(wide)},
                     {out(wide), out({1, 2, 8})}},
                    "head dimension 160 is above the CUDA flash-attention kernels' limit of 128");
  h.expectBindError({"attention grad D=160", "causal_attention_grad", {scale},
                     {f32(wide), f32(wide), f32(wide), f32(wide), f32(wide), f32({1, 2, 8})},
                     {out(wide), out(wide), out(wide)}},
                    "head dimension 160 is above the CUDA flash-attention kernels' limit of 128");
}

}  // namespace dtc::gputest
