// Context parallelism's attention on CUDA (the flash kernels with positions) against the CPU
// kernels, on each rank of the run's mesh (one axis "x" of every process): the queries a block
// of the sequence (`seq_axes`), the keys the whole sequence (all-gather) or one block as long as
// the queries' (a ring's step, `kv_shift`), in the original order and load-balanced
// (`seq_chunks`, chunks of 24 and 50 rows: tiles of 64 that straddle chunks), then the merge of
// two blocks' partial results by their log-sum-exps. On one process the cases reduce to the
// load-balanced layout of a whole sequence. A ring's block later in the sequence than a query
// gives it out 0 and lse −inf on both backends. Tolerances as attention_cases.cc's.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/transformer_kernels.h"
#include "harness.h"
#include "support/thread_pool.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16;

// One layout on one rank: `devices` ranks split the sequence, this one holding rows
// [rank·t, (rank + 1)·t) of the layout; `chunks` > 0: load-balanced.
struct Layout {
  int64_t devices, rank, t, d, chunks;
  DType type = kF32;

  Shape block() const { return {2, 3, t, d}; }
  Shape whole() const { return {2, 3, devices * t, d}; }
  Shape rows() const { return {2, 3, t}; }
  std::string label(const std::string& what) const {
    return what + (type == kBF16 ? " bf16" : "") + " t=" + std::to_string(t) +
           " d=" + std::to_string(d) + " chunks=" + std::to_string(chunks) + " rank " +
           std::to_string(rank) + "/" + std::to_string(devices);
  }
  std::vector<Attr> attrs(int64_t shift) const {
    std::vector<Attr> a = {floatAttr("scale", 1.0 / std::sqrt(static_cast<double>(d))),
                           intsAttr("seq_axes", {0}), intAttr("seq_chunks", chunks)};
    if (shift >= 0) a.push_back(intAttr("kv_shift", shift));
    return a;
  }
  double tolerance(double f32) const { return type == kBF16 ? 1e-2 : f32; }
};

Case withType(const Layout& l, Case c) {
  c.tolerance = l.tolerance(c.tolerance);
  if (l.type != kF32) c.maxUlps = -1;
  return c;
}

// Forward: random q, k and v; keys whole (shift < 0) or the block `shift` places back.
Case forwardCase(const Layout& l, int64_t shift) {
  const Shape keys = shift < 0 ? l.whole() : l.block();
  return withType(l,
                  {l.label(shift < 0 ? "cp attention (keys whole)"
                                     : "cp attention (ring step " + std::to_string(shift) + ")"),
                   "causal_attention",
                   l.attrs(shift),
                   {lowp(l.type, l.block(), -2, 2), lowp(l.type, keys, -2, 2), lowp(l.type, keys)},
                   {outAs(l.type, l.block()), out(l.rows())},
                   1e-5});
}

// The gradient at a consistent point: out and lse of this rank's queries over every key (the
// CPU kernel with the rank's positions), the keys whole or one block of them.
Case gradCase(const Layout& l, int64_t shift, uint64_t seed) {
  const int64_t slices = 6, t = l.t, d = l.d, length = l.devices * t;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> wide(-2, 2), unit(-1, 1);
  std::vector<float> q(slices * t * d), dout(q.size()), k(slices * length * d), v(k.size());
  for (float& x : q) x = roundTo(l.type, wide(rng));
  for (float& x : k) x = roundTo(l.type, wide(rng));
  for (float& x : v) x = roundTo(l.type, unit(rng));
  for (float& x : dout) x = roundTo(l.type, unit(rng));
  std::vector<float> o(q.size()), lse(slices * t);
  ThreadPool pool(2);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  cpu::causalAttention(q.data(), k.data(), v.data(), o.data(), lse.data(), slices, t, length, d,
                       scale, AttentionPositions{l.rank * t, 0, length, l.chunks}, pool);
  for (float& x : o) x = roundTo(l.type, x);
  std::vector<float> kb = k, vb = v;
  Shape keys = l.whole();
  if (shift >= 0) {  // the block of the rank `shift` places back
    const int64_t owner = (l.rank - shift + l.devices) % l.devices;
    kb.assign(slices * t * d, 0);
    vb.assign(kb.size(), 0);
    for (int64_t s = 0; s < slices; ++s)
      for (int64_t x = 0; x < t * d; ++x) {
        kb[s * t * d + x] = k[(s * length + owner * t) * d + x];
        vb[s * t * d + x] = v[(s * length + owner * t) * d + x];
      }
    keys = l.block();
  }
  return withType(
      l,
      {l.label(shift < 0 ? "cp attention grad (keys whole)"
                         : "cp attention grad (ring step " + std::to_string(shift) + ")"),
       "causal_attention_grad",
       l.attrs(shift),
       {givenAs(l.type, l.block(), dout), givenAs(l.type, l.block(), q), givenAs(l.type, keys, kb),
        givenAs(l.type, keys, vb), givenAs(l.type, l.block(), o), given(l.rows(), lse)},
       {outAs(l.type, l.block()), outAs(l.type, keys), outAs(l.type, keys)},
       1e-4});
}

// Two partial results: random out, lse in [-3, 3] with every fifth row −inf in a (a block the
// query does not see) and every seventh in both.
Case mergeCase(DType type, const Shape& shape) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  std::mt19937_64 rng(rows);
  std::uniform_real_distribution<float> spread(-3, 3);
  std::vector<float> a(rows), b(rows);
  const float none = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    a[r] = r % 5 == 0 || r % 7 == 0 ? none : spread(rng);
    b[r] = r % 7 == 0 ? none : spread(rng);
  }
  const Shape lse(shape.begin(), shape.end() - 1);
  Case c{std::string("attention_merge") + (type == kBF16 ? " bf16" : ""),
         "attention_merge",
         {},
         {lowp(type, shape), given(lse, a), lowp(type, shape), given(lse, b)},
         {outAs(type, shape), out(lse)},
         type == kBF16 ? 1e-2 : 1e-6};
  if (type != kF32) c.maxUlps = 1;
  return c;
}

}  // namespace

void runContextAttentionCases(Harness& h, int64_t devices, int64_t rank) {
  uint64_t seed = 1000;
  for (int64_t t : {48, 100})
    for (int64_t d : {32, 64})
      for (int64_t chunks : {int64_t{0}, 2 * devices}) {
        const Layout l{devices, rank, t, d, chunks};
        h.run(forwardCase(l, -1));
        h.run(gradCase(l, -1, seed++));
        for (int64_t shift = 0; shift < devices; ++shift) {
          h.run(forwardCase(l, shift));
          h.run(gradCase(l, shift, seed++));
        }
      }
  // 16-bit operands take the flash kernels on blocks (the GEMM path's row pass is causal on a
  // whole sequence).
  const Layout low{devices, rank, 100, 64, 2 * devices, kBF16};
  h.run(forwardCase(low, -1));
  h.run(gradCase(low, -1, seed++));
  h.run(forwardCase(low, devices - 1));
  h.run(gradCase(low, devices - 1, seed++));
  for (DType type : {kF32, kBF16}) h.run(mergeCase(type, {2, 3, 37, 64}));
  // A shift the mesh does not have, and keys that are neither whole nor a block.
  Layout bad{devices, rank, 16, 8, 0};
  h.expectSameBindError({"cp attention kv_shift outside the group",
                         "causal_attention",
                         bad.attrs(devices),
                         {f32(bad.block()), f32(bad.block()), f32(bad.block())},
                         {out(bad.block()), out(bad.rows())}});
  h.expectSameBindError({"cp attention keys neither whole nor a block",
                         "causal_attention",
                         bad.attrs(-1),
                         {f32(bad.block()), f32({2, 3, 24, 8}), f32({2, 3, 24, 8})},
                         {out(bad.block()), out(bad.rows())}});
}

}  // namespace dtc::gputest
