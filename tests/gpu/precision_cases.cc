// The cases of kernels_test for mixed precision and loss scaling: bf16/f16 contractions, casts
// (every 16-bit pattern, and f32 values around every rounding boundary), nonfinite_count,
// loss_scale_step and select, 16-bit collectives, and the contracts of all of them.
//
// Tolerances. Casts and the loss-scale steps are bit for bit (the same integer rounding on both
// sides). A 16-bit contraction is the f32 sum of exact products rounded once on both backends,
// but the sums run in different orders (and the tensor cores' f32 adder is not the CPU's), so a
// sum next to a rounding boundary may round the other way: at most 1 ulp of the 16-bit type
// apart, and well within 1e-2 (bf16) / 1e-3 (f16) of the largest value. The 1-ulp bound is
// asserted on operands of one sign, where no cancellation makes the f32 difference large next
// to a tiny result; mixed-sign products are checked on the relative bound and report their ulps.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "harness.h"

namespace dtc::gputest {
namespace {

constexpr DType kBF16 = DType::kBF16, kF16 = DType::kF16;

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// float32 values for the casts to 16 bits: specials, each type's overflow and underflow edges,
// exact ties (both parities), random bit patterns (NaN payloads included) and random values
// over the exponents float16 covers.
std::vector<float> castSweep() {
  std::vector<uint32_t> bits = {
      0x00000000, 0x80000000, 0x7f800000,
      0xff800000,  // ±0, ±inf
      0x7fc00000, 0xffc00000, 0x7f800001,
      0xff812345,                          // quiet and signalling NaNs, payloads
      0x7fbfffff, 0x7f7fffff, 0xff7fffff,  // NaN, ±FLT_MAX
      0x00800000, 0x00000001, 0x007fffff,
      0x80000001,  // FLT_MIN, denormals
      0x7f7f7fff, 0x7f7f8000, 0x7f7f8001,
      0x7f7e8000,  // bf16: below / at / above the overflow tie
      0x477fe000, 0x477fefff, 0x477ff000,
      0x477ff001,              // f16: 65504, just below 65520, 65520, above
      0x47800000, 0xc77ff000,  // f16: 65536, -65520
      0x33800000, 0x33000000, 0x33000001,
      0x32ffffff,  // f16: 2^-24, 2^-25 (tie to 0), around it
      0x33c00000, 0x34200000, 0x38800000,
      0x387fffff,  // f16: 1.5·2^-24 (tie up), subnormal ties, 2^-14
      0x38000000, 0x387fe000, 0x387ff000,
      0xb87ff000,  // f16: subnormals, the tie to 2^-14
  };
  std::mt19937_64 rng(20240601);
  for (int i = 0; i < 4000; ++i) {
    const uint32_t hi = static_cast<uint32_t>(rng()) & 0xffff0000u;
    bits.push_back(hi | 0x8000u);  // exactly halfway between two bf16 values
    const uint32_t exponent = 103 + static_cast<uint32_t>(rng() % 40);  // f16 subnormals .. 2^16
    bits.push_back((static_cast<uint32_t>(rng()) & 0x80000000u) | (exponent << 23) |
                   (static_cast<uint32_t>(rng()) & 0x7fe000u) | 0x1000u);  // f16 ties
  }
  for (int i = 0; i < 20000; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  for (int i = 0; i < 20000; ++i) {
    const uint32_t exponent = 97 + static_cast<uint32_t>(rng() % 48);  // 2^-30 .. 2^17
    bits.push_back((static_cast<uint32_t>(rng()) & 0x807fffffu) | (exponent << 23));
  }
  std::vector<float> values;
  for (uint32_t b : bits) values.push_back(fromBits(b));
  return values;
}

std::vector<uint16_t> allWords() {
  std::vector<uint16_t> w(65536);
  for (int i = 0; i < 65536; ++i) w[i] = static_cast<uint16_t>(i);
  return w;
}

// Random finite values with inf, -inf and NaN at every `every`-th position from `first`.
std::vector<float> planted(int64_t n, int64_t first, int64_t every) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> pick(-1e4f, 1e4f);
  std::vector<float> v(n);
  const float specials[] = {std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (int64_t i = 0; i < n; ++i) v[i] = pick(rng);
  for (int64_t i = first, k = 0; i < n; i += every, ++k) v[i] = specials[k % 3];
  return v;
}

Case bitwise(Case c) {
  c.bitwise = true;
  return c;
}

// A 16-bit contraction: operands uniform in [lo, 1) rounded to `t`; the 1-ulp bound asserted
// when lo >= 0 (see the file's comment).
Case contraction(const std::string& label, const std::string& op, std::vector<Attr> attrs, DType t,
                 const Shape& a, const Shape& b, const Shape& c, float lo = 0) {
  Case k{label + (t == kBF16 ? " bf16" : " f16"),
         op,
         std::move(attrs),
         {lowp(t, a, lo, 1), lowp(t, b, lo, 1)},
         {outAs(t, c)}};
  k.tolerance = t == kBF16 ? 1e-2 : 1e-3;
  k.maxUlps = lo >= 0 ? 1 : -1;
  return k;
}

}  // namespace

std::vector<Case> precisionCases() {
  const auto t = [](int64_t v) { return intAttr("transpose_lhs", v); };
  const auto u = [](int64_t v) { return intAttr("transpose_rhs", v); };
  std::vector<Case> cases;
  for (DType d : {kBF16, kF16}) {
    const std::vector<Case> gemms = {
        contraction("matmul", "matmul", {}, d, {37, 53}, {53, 29}, {37, 29}),
        contraction("matmul lhsT", "matmul", {t(1)}, d, {53, 37}, {53, 29}, {37, 29}),
        contraction("matmul rhsT", "matmul", {u(1)}, d, {37, 53}, {29, 53}, {37, 29}),
        contraction("matmul both T", "matmul", {t(1), u(1)}, d, {53, 37}, {29, 53}, {37, 29}),
        contraction("matmul 256x384x512", "matmul", {}, d, {256, 512}, {512, 384}, {256, 384}),
        contraction("matmul deep k=4096", "matmul", {u(1)}, d, {64, 4096}, {96, 4096}, {64, 96}),
        contraction("matmul k=0", "matmul", {}, d, {5, 0}, {0, 7}, {5, 7}),
        contraction("matmul mixed signs", "matmul", {}, d, {128, 1024}, {1024, 128}, {128, 128},
                    -1),
        contraction("batch_matmul", "batch_matmul", {}, d, {2, 3, 17, 19}, {2, 3, 19, 23},
                    {2, 3, 17, 23}),
        contraction("batch_matmul lhsT", "batch_matmul", {t(1)}, d, {6, 19, 17}, {6, 19, 23},
                    {6, 17, 23}),
        contraction("batch_matmul rhsT", "batch_matmul", {u(1)}, d, {6, 17, 19}, {6, 23, 19},
                    {6, 17, 23}),
        contraction("batch_matmul both T", "batch_matmul", {t(1), u(1)}, d, {6, 19, 17},
                    {6, 23, 19}, {6, 17, 23}),
        contraction("batch_matmul attention", "batch_matmul", {u(1)}, d, {4, 128, 64}, {4, 128, 64},
                    {4, 128, 128}),
        contraction("linear", "linear", {}, d, {3, 7, 45}, {33, 45}, {3, 7, 33}),
        contraction("linear 512x256", "linear", {}, d, {8, 64, 256}, {512, 256}, {8, 64, 512}),
        contraction("linear_grad_input", "linear_grad_input", {}, d, {3, 7, 33}, {33, 45},
                    {3, 7, 45}),
        contraction("linear_grad_weight", "linear_grad_weight", {}, d, {3, 7, 33}, {3, 7, 45},
                    {33, 45}),
        contraction("linear_grad_weight k=2048", "linear_grad_weight", {}, d, {16, 128, 64},
                    {16, 128, 96}, {64, 96}),
    };
    cases.insert(cases.end(), gemms.begin(), gemms.end());
    // A weight gradient for f32 master weights: 16-bit operands, the f32 sum never rounded.
    for (Case wide : {contraction("linear_grad_weight f32 output", "linear_grad_weight", {}, d,
                                  {3, 7, 33}, {3, 7, 45}, {33, 45}),
                      contraction("linear_grad_weight k=8192 f32 output", "linear_grad_weight", {},
                                  d, {8, 1024, 64}, {8, 1024, 96}, {64, 96}, -1)}) {
      // Both sum the same exact products in f32, in different orders (tensor cores in blocks).
      wide.outputs[0] = out(wide.outputs[0].shape);
      wide.tolerance = wide.inputs[0].shape[1] > 1000 ? 1e-4 : 1e-5;
      cases.push_back(wide);
    }
    // Layout ops on 16-bit elements (dtc-fold-casts): pure moves, bit for bit.
    const std::string tag = d == kBF16 ? " bf16" : " f16";
    Case heads{"transpose heads" + tag,
               "transpose",
               {intsAttr("perm", {0, 2, 1, 3})},
               {lowp(d, {2, 17, 3, 24})},
               {outAs(d, {2, 3, 17, 24})}};
    Case any{"transpose 3-D" + tag,
             "transpose",
             {intsAttr("perm", {2, 0, 1})},
             {lowp(d, {5, 7, 9})},
             {outAs(d, {9, 5, 7})}};
    Case split{"split qkv" + tag,
               "split",
               {intAttr("axis", 2), intAttr("parts", 3)},
               {lowp(d, {2, 17, 96})},
               {outAs(d, {2, 17, 32}), outAs(d, {2, 17, 32}), outAs(d, {2, 17, 32})}};
    Case concat{"concat qkv" + tag,
                "concat",
                {intAttr("axis", 2)},
                {lowp(d, {2, 17, 32}), lowp(d, {2, 17, 32}), lowp(d, {2, 17, 32})},
                {outAs(d, {2, 17, 96})}};
    for (Case* c : {&heads, &any, &split, &concat}) {
      c->bitwise = true;
      cases.push_back(*c);
    }
    // LayerNorm writing its output rounded to 16 bits (dtc-fold-casts folds the cast into it):
    // statistics in double on both backends, one rounding of the same f32 value, so at most the
    // odd 1-ulp tie apart; mean and rstd f32 as always.
    // (Ulps are reported, not asserted: next to the mean, x − mean cancels.)
    Case norm{"layer_norm" + tag + " y",
              "layer_norm",
              {floatAttr("eps", 1e-5)},
              {f32({6, 17, 96}, -3, 3), f32({96}, 0.5f, 1.5f), f32({96})},
              {outAs(d, {6, 17, 96}), out({6, 17}), out({6, 17})},
              d == kBF16 ? 1e-2 : 2e-3};
    norm.maxUlps = -1;
    cases.push_back(norm);
    // Its gradient reading a 16-bit input gradient (a contraction's) widened: then the f32
    // kernel's arithmetic on the same exact values.
    cases.push_back({"layer_norm_grad" + tag + " dy",
                     "layer_norm_grad",
                     {},
                     {lowp(d, {6, 17, 96}), f32({6, 17, 96}, -3, 3), f32({96}, 0.5f, 1.5f),
                      f32({6, 17}), f32({6, 17}, 0.5f, 2)},
                     {out({6, 17, 96}), out({96}), out({96})}});
  }

  const std::vector<float> sweep = castSweep();
  const int64_t n = static_cast<int64_t>(sweep.size());
  const std::vector<uint16_t> words = allWords();
  const std::vector<Case> casts = {
      {"cast f32->bf16 sweep", "cast", {}, {given({n}, sweep)}, {outAs(kBF16, {n})}},
      {"cast f32->f16 sweep", "cast", {}, {given({n}, sweep)}, {outAs(kF16, {n})}},
      {"cast bf16->f32 every pattern",
       "cast",
       {},
       {lowpBits(kBF16, {256, 256}, words)},
       {out({256, 256})}},
      {"cast f16->f32 every pattern", "cast", {}, {lowpBits(kF16, {65536}, words)}, {out({65536})}},
      {"cast bf16->f16 every pattern",
       "cast",
       {},
       {lowpBits(kBF16, {65536}, words)},
       {outAs(kF16, {65536})}},
      {"cast f16->bf16 every pattern",
       "cast",
       {},
       {lowpBits(kF16, {65536}, words)},
       {outAs(kBF16, {65536})}},
      {"cast f32->f32", "cast", {}, {f32({33, 7})}, {out({33, 7})}},
      {"cast bf16->bf16", "cast", {}, {lowp(kBF16, {33, 7})}, {outAs(kBF16, {33, 7})}},
      {"cast f32->bf16 1M",
       "cast",
       {},
       {f32({1000, 1001}, -300, 300)},
       {outAs(kBF16, {1000, 1001})}},
      {"cast empty", "cast", {}, {f32({0, 4})}, {outAs(kF16, {0, 4})}},
  };
  for (const Case& c : casts) cases.push_back(bitwise(c));

  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<Case> counts = {
      {"nonfinite_count none", "nonfinite_count", {}, {f32({1000, 33}, -1e30f, 1e30f)}, {out({})}},
      {"nonfinite_count planted 1M",
       "nonfinite_count",
       {},
       {given({1000, 1001}, planted(1001000, 17, 997))},
       {out({})}},
      {"nonfinite_count one NaN",
       "nonfinite_count",
       {},
       {given({5, 5}, planted(25, 24, 100))},
       {out({})}},
      {"nonfinite_count all",
       "nonfinite_count",
       {},
       {given({4}, {inf, -inf, nan, -nan})},
       {out({})}},
      {"nonfinite_count empty", "nonfinite_count", {}, {f32({0})}, {out({})}},
  };
  for (const Case& c : counts) cases.push_back(bitwise(c));

  const std::vector<Attr> scaler = {intAttr("growth_interval", 2000),
                                    floatAttr("growth_factor", 2.0),
                                    floatAttr("backoff_factor", 0.5)};
  const std::vector<Attr> odd = {intAttr("growth_interval", 3), floatAttr("growth_factor", 1.7),
                                 floatAttr("backoff_factor", 0.3)};
  const auto step = [&](const std::string& label, const std::vector<Attr>& attrs, float scale,
                        float good, float nonfinite, bool inPlace) {
    return bitwise({label,
                    "loss_scale_step",
                    attrs,
                    {given({}, {scale}), given({}, {good}), given({}, {nonfinite})},
                    {out({}), out({}), out({}, inPlace ? 0 : -1), out({}, inPlace ? 1 : -1)}});
  };
  const std::vector<Case> steps = {
      step("loss_scale_step overflow", scaler, 65536.0f, 17, 3, false),
      step("loss_scale_step growth", scaler, 65536.0f, 1999, 0, false),
      step("loss_scale_step plain", scaler, 65536.0f, 5, 0, false),
      step("loss_scale_step overflow at growth", scaler, 1024.0f, 1999, 1, false),
      step("loss_scale_step in place growth", scaler, 32768.0f, 1999, 0, true),
      step("loss_scale_step in place overflow", scaler, 32768.0f, 12, 8, true),
      step("loss_scale_step NaN count", scaler, 4096.0f, 3, nan, false),
      step("loss_scale_step odd factors", odd, 3.0f, 1, 0, false),
      step("loss_scale_step odd backoff", odd, 3.0e-38f, 0, 1, false),
      step("loss_scale_step growth to inf", odd, 3.0e38f, 2, 0, false),
  };
  cases.insert(cases.end(), steps.begin(), steps.end());

  const std::vector<Case> selects = {
      {"select true",
       "select",
       {},
       {given({}, {1.0f}), f32({33, 45}), f32({33, 45})},
       {out({33, 45})}},
      {"select false",
       "select",
       {},
       {given({}, {0.0f}), f32({33, 45}), f32({33, 45})},
       {out({33, 45})}},
      {"select NaN is true", "select", {}, {given({}, {nan}), f32({7}), f32({7})}, {out({7})}},
      {"select -0 is false", "select", {}, {given({}, {-0.0f}), f32({7}), f32({7})}, {out({7})}},
      {"select false in place",
       "select",
       {},
       {given({}, {0.0f}), f32({1000, 1001}), f32({1000, 1001})},
       {out({1000, 1001}, 2)}},
      {"select true in place",
       "select",
       {},
       {given({}, {1.0f}), f32({1000, 1001}), f32({1000, 1001})},
       {out({1000, 1001}, 2)}},
      {"select keeps non-finite",
       "select",
       {},
       {given({}, {1.0f}), given({6}, planted(6, 0, 2)), f32({6})},
       {out({6})}},
  };
  for (const Case& c : selects) cases.push_back(bitwise(c));
  return cases;
}

// 16-bit collectives over the one-axis mesh of `n` processes (sums and gathers on NCCL in the
// 16-bit type; host-staged, strided and the other moves widened to f32 as on the CPU: moves
// exact, sums in f32), and f32 ones whose blocks NCCL must pack or unpack.
std::vector<Case> precisionCollectiveCases(int64_t n) {
  const Attr axes = intsAttr("axes", {0});
  const auto dim = [](int64_t d) { return intAttr("dim", d); };
  auto sum = [](Case c, DType t) {
    c.tolerance = t == kBF16 ? 1e-2 : 1e-3;
    return c;
  };
  return {
      sum({"all_reduce bf16 bucket",
           "all_reduce",
           {axes},
           {lowp(kBF16, {37, 45}), lowp(kBF16, {5})},
           {outAs(kBF16, {37, 45}), outAs(kBF16, {5})}},
          kBF16),
      sum({"all_reduce f16 in place",
           "all_reduce",
           {axes},
           {lowp(kF16, {77})},
           {outAs(kF16, {77}, 0)}},
          kF16),
      bitwise({"all_reduce max bf16",
               "all_reduce",
               {axes, stringAttr("reduction", "max")},
               {lowp(kBF16, {50})},
               {outAs(kBF16, {50})}}),
      bitwise({"all_gather f16 dim 0",
               "all_gather",
               {axes, dim(0)},
               {lowp(kF16, {3, 7})},
               {outAs(kF16, {3 * n, 7})}}),
      bitwise({"all_gather bf16 dim 1",
               "all_gather",
               {axes, dim(1)},
               {lowp(kBF16, {4, 6, 2})},
               {outAs(kBF16, {4, 6 * n, 2})}}),
      sum({"reduce_scatter bf16 dim 0",
           "reduce_scatter",
           {axes, dim(0)},
           {lowp(kBF16, {6 * n, 5})},
           {outAs(kBF16, {6, 5})}},
          kBF16),
      sum({"reduce_scatter f16 dim 1",
           "reduce_scatter",
           {axes, dim(1)},
           {lowp(kF16, {5, 6 * n, 3})},
           {outAs(kF16, {5, 6, 3})}},
          kF16),
      bitwise({"local_slice bf16",
               "local_slice",
               {axes, dim(0)},
               {lowp(kBF16, {4 * n, 3})},
               {outAs(kBF16, {4, 3})}}),
      bitwise({"all_to_all f16",
               "all_to_all",
               {axes, intAttr("split_dim", 1), intAttr("concat_dim", 0)},
               {lowp(kF16, {2, 3 * n, 4})},
               {outAs(kF16, {2 * n, 3, 4})}}),
      bitwise({"collective_broadcast bf16",
               "collective_broadcast",
               {axes, intAttr("root", 0)},
               {lowp(kBF16, {9, 5})},
               {outAs(kBF16, {9, 5})}}),
      // f32, strided on the receiving side: NCCL's blocks are unpacked.
      {"all_to_all concat 1",
       "all_to_all",
       {axes, intAttr("split_dim", 0), intAttr("concat_dim", 1)},
       {f32({2 * n, 3, 4})},
       {out({2, 3 * n, 4})}},
      {"all_to_all both strided",
       "all_to_all",
       {axes, intAttr("split_dim", 2), intAttr("concat_dim", 1)},
       {f32({2, 3, 4 * n})},
       {out({2, 3 * n, 4})}},
      {"reduce_scatter dim 0", "reduce_scatter", {axes, dim(0)}, {f32({6 * n, 5})}, {out({6, 5})}},
      {"all_gather int64 dim 0",
       "all_gather",
       {axes, dim(0)},
       {ids({3, 4}, 1 << 20)},
       {outI64({3 * n, 4})}},
  };
}

// Steps both backends refuse at bind time, with the same message.
std::vector<Case> precisionMalformedCases() {
  const std::vector<Attr> badFactors = {intAttr("growth_interval", 2000),
                                        floatAttr("growth_factor", 0.5),
                                        floatAttr("backoff_factor", 0.5)};
  return {
      {"bad cast dtype", "cast", {}, {ids({4}, 10)}, {outAs(kBF16, {4})}},
      {"bad cast shape", "cast", {}, {f32({4})}, {outAs(kBF16, {5})}},
      {"bad cast arity", "cast", {}, {f32({4}), f32({4})}, {out({4})}},
      {"bad loss_scale_step factors",
       "loss_scale_step",
       badFactors,
       {f32({}), f32({}), f32({})},
       {out({}), out({}), out({}), out({})}},
      {"bad loss_scale_step shape",
       "loss_scale_step",
       badFactors,
       {f32({2}), f32({}), f32({})},
       {out({}), out({}), out({}), out({})}},
      {"bad select predicate", "select", {}, {f32({2}), f32({2}), f32({2})}, {out({2})}},
      {"bad select shapes", "select", {}, {f32({}), f32({2}), f32({3})}, {out({2})}},
      {"bad nonfinite_count output", "nonfinite_count", {}, {f32({5})}, {out({2})}},
  };
}

// Steps that mix 16-bit and float32 operands where the compiler never does: the CPU widens every
// 16-bit operand and computes them in f32, the CUDA kernels take one element type and refuse
// them at bind time, by name.
std::vector<std::pair<Case, std::string>> precisionDeviceRefusals() {
  return {
      {{"mixed matmul", "matmul", {}, {lowp(kBF16, {4, 8}), f32({8, 2})}, {outAs(kBF16, {4, 2})}},
       "matmul at mixed matmul: operands must share one element type, got float32 and bfloat16"},
      {{"mixed all_reduce", "all_reduce", {intsAttr("axes", {0})}, {lowp(kBF16, {4})}, {out({4})}},
       "all_reduce at mixed all_reduce: operands must share one element type, got bfloat16 and "
       "float32"},
  };
}

}  // namespace dtc::gputest
