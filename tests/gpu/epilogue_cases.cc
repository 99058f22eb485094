// The fused linear epilogues (linear_bias, linear_bias_gelu, linear_grad_input_gelu,
// linear_grad_weight_bias) against the CPU kernels, on each of the CUDA binder's two forms: the
// default, one cuBLASLt matmul with its BIAS / GELU_AUX_BIAS / DGELU / BGRADB epilogue where
// cuBLASLt offers one, and the unfused form (DTC_CUDA_LT_EPILOGUES=0: a cuBLAS GEMM, then
// kernels/epilogue.cu). Shapes: a 3-D x [2, 17, 64]
// with N = 96 (every fused epilogue applies); N = 30, K = 20 (pre's leading dimension is not a
// multiple of 8, so the GELU steps run unfused on either pass); [512, 768] -> 3072; empty sums
// and no rows. 16-bit x and w also with y of their type (mixed precision's folded narrowing
// cast; pre stays f32). Then the contracts: steps both backends refuse with the same words, and
// mixes the CPU widens and the CUDA kernels do not take.
//
// Tolerances (the harness's max |cuda − cpu| / max |cpu| per output; f32 outputs unless said).
// float32: 1e-5, the GEMM's summation order being the only difference (TF32 is off by default;
// the bias add and the GELU are the CPU's operations in its order, tanhf aside: f32 steps take
// cuBLASLt for the bias only and run the GELU, or its gradient, as our own pass).
// cuBLASLt's GELU epilogues (16-bit operands only) are held to 2e-3: their tanh is reported to
// be approximate (the hardware's tanh.approx is good to 2^-11 relative). GELU moves by 0.5·x·Δt,
// under 2.5e-4 of its largest value; GELU's derivative by (0.5 − x·t·√(2/π)(1 + 3·0.044715x²))·Δt,
// at most ~1.9·Δt for pre in [-2, 2], under 1e-3. A wrong layout or bias broadcast is off by
// O(1), so the bound still catches it.
// bfloat16 / float16 x and w: both backends multiply the same 16-bit values, and every product
// is exact in f32 (8 + 8 or 11 + 11 significand bits, under 24), so the results differ by the
// summation order alone, as in f32; f32 results are never rounded to 16 bits. The mixed-precision
// suite's 1e-2 (bf16) and 2e-3 (f16) bounds are kept (the printed error shows the real margin), and
// the cuBLASLt GELU bound above stays within them.
// A 16-bit y is that f32 result rounded once on each side (cuBLASLt's D conversion, or our pass
// with support/half.h's rounding; the CPU rounds its widened result the same way), so the two
// sit at most 1 ulp of T apart where the f32 values differ by less than one ulp: the summation
// order's ~1e-6 relative, or the fast tanh's ~2.5e-4 of a positive GELU, against an ulp of at
// least 4.9e-4 (f16) or 3.9e-3 (bf16) relative. That bound is asserted where x, w and the bias
// are of one sign (no cancellation, as precision_cases.cc), reported only for mixed signs; one
// ulp of the largest value is within the relative bounds above, which hold for both.
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kF16 = DType::kF16;
constexpr const char* kSwitch = "DTC_CUDA_LT_EPILOGUES";

// x, w or dy of type t, uniform in [lo, hi) (rounded to t).
Input operand(DType t, const Shape& s, float lo = -1, float hi = 1) {
  return t == kF32 ? f32(s, lo, hi) : lowp(t, s, lo, hi);
}

std::string describe(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

Shape with(Shape lead, int64_t last) {
  lead.push_back(last);
  return lead;
}

// See the file's comment.
double tolerance(DType t, bool gelu, bool fusedPass) {
  double bound = t == kBF16 ? 1e-2 : t == kF16 ? 2e-3 : 1e-5;
  if (gelu && fusedPass && t != kF32 && bound < 2e-3) bound = 2e-3;
  return bound;
}

// The forward ops with y of x's 16-bit type t (pre f32), operands and bias uniform in [lo, 1);
// the 1-ulp bound asserted when lo >= 0 (see the file's comment).
std::vector<Case> narrowCases(DType t, const Shape& lead, int64_t n, int64_t k, bool fusedPass,
                              float lo) {
  const std::string dims = describe(with(lead, k)) + "x" + describe({n, k}) + typeLabel(t) +
                           " -> y" + typeLabel(t) + (lo >= 0 ? " one sign" : "") +
                           (fusedPass ? "" : " unfused");
  const std::vector<Input> in = {operand(t, with(lead, k), lo), operand(t, {n, k}, lo),
                                 f32({n}, lo)};
  Case bias{"linear_bias " + dims, "linear_bias", {}, in, {outAs(t, with(lead, n))}};
  Case gelu{"linear_bias_gelu " + dims,
            "linear_bias_gelu",
            {},
            in,
            {outAs(t, with(lead, n)), out(with(lead, n))}};
  // The input gradient's dx in dy's type: the f32 result rounded once.
  Case grad{"linear_grad_input_gelu " + dims,
            "linear_grad_input_gelu",
            {},
            {operand(t, with(lead, n), lo), operand(t, {n, k}, lo), f32(with(lead, k), -2, 2)},
            {outAs(t, with(lead, k))}};
  // pre in that type too (as torch.autocast keeps GELU's input): cuBLASLt's whole epilogue, its
  // aux matrix of D's type.
  Case geluLow = gelu, gradLow = grad;
  geluLow.label += " pre" + typeLabel(t);
  geluLow.outputs[1] = outAs(t, with(lead, n));
  gradLow.label += " pre" + typeLabel(t);
  gradLow.inputs[2] = lowp(t, with(lead, k), -2, 2);
  bias.tolerance = tolerance(t, false, fusedPass);
  gelu.tolerance = geluLow.tolerance = tolerance(t, true, fusedPass);
  grad.tolerance = gradLow.tolerance = tolerance(t, true, fusedPass);
  bias.maxUlps = gelu.maxUlps = geluLow.maxUlps = lo >= 0 ? 1 : -1;
  grad.maxUlps = gradLow.maxUlps = -1;  // GELU's derivative changes sign: reported only
  return {bias, gelu, grad, geluLow, gradLow};
}

// The forward ops on x [lead..., k], w [n, k], b [n]; the backward one on dy [lead..., n],
// w [n, k], pre [lead..., k] in [-2, 2) (GELU's curved part, where its derivative varies most).
std::vector<Case> epilogueCases(DType t, const Shape& lead, int64_t n, int64_t k, bool fusedPass) {
  const std::string dims = describe(with(lead, k)) + "x" + describe({n, k}) + typeLabel(t) +
                           (fusedPass ? "" : " unfused");
  Case bias{"linear_bias " + dims,
            "linear_bias",
            {},
            {operand(t, with(lead, k)), operand(t, {n, k}), f32({n})},
            {out(with(lead, n))}};
  bias.tolerance = tolerance(t, false, fusedPass);
  Case gelu{"linear_bias_gelu " + dims,
            "linear_bias_gelu",
            {},
            {operand(t, with(lead, k)), operand(t, {n, k}), f32({n})},
            {out(with(lead, n)), out(with(lead, n))}};
  gelu.tolerance = tolerance(t, true, fusedPass);
  Case grad{"linear_grad_input_gelu " + dims,
            "linear_grad_input_gelu",
            {},
            {operand(t, with(lead, n)), operand(t, {n, k}), f32(with(lead, k), -2, 2)},
            {out(with(lead, k))}};
  grad.tolerance = tolerance(t, true, fusedPass);
  // The weight and bias gradients of dy [lead..., n] and x [lead..., k], both f32: sums of the
  // same exact products (and 16-bit values) in other orders.
  Case weightBias{"linear_grad_weight_bias " + dims,
                  "linear_grad_weight_bias",
                  {},
                  {operand(t, with(lead, n)), operand(t, with(lead, k))},
                  {out({n, k}), out({n})}};
  weightBias.tolerance = t == kF32 ? 1e-5 : 1e-4;
  return {bias, gelu, grad, weightBias};
}

}  // namespace

void runEpilogueCases(Harness& h) {
  ScopedEnv lt(kSwitch);
  for (bool fusedPass : {true, false}) {
    lt.set(fusedPass ? nullptr : "0");  // unset: the default, cuBLASLt where it applies
    for (DType t : {kF32, kBF16, kF16}) {
      for (const Case& c : epilogueCases(t, {2, 17}, 96, 64, fusedPass)) h.run(c);
      for (const Case& c : epilogueCases(t, {7, 3}, 30, 20, fusedPass)) h.run(c);
      for (const Case& c : epilogueCases(t, {512}, 3072, 768, fusedPass)) h.run(c);
    }
    for (DType t : {kBF16, kF16}) {
      for (float lo : {-1.0f, 0.0f}) {
        for (const Case& c : narrowCases(t, {2, 17}, 96, 64, fusedPass, lo)) h.run(c);
        for (const Case& c : narrowCases(t, {7, 3}, 30, 20, fusedPass, lo)) h.run(c);
      }
      for (const Case& c : narrowCases(t, {512}, 3072, 768, fusedPass, 0)) h.run(c);
      // An empty sum: y = the bias (or its GELU) rounded, the same f32 value on both sides.
      for (Case c : narrowCases(t, {4}, 6, 0, fusedPass, -1)) {
        c.maxUlps = 1;
        h.run(c);
      }
    }
    // Empty sums (y = the bias; dx = 0 · GELU'(pre)) and no rows at all.
    for (const Case& c : epilogueCases(kF32, {4}, 6, 0, fusedPass)) h.run(c);
    h.run({std::string("linear_grad_input_gelu empty sum") + (fusedPass ? "" : " unfused"),
           "linear_grad_input_gelu",
           {},
           {f32({4, 0}), f32({0, 5}), f32({4, 5}, -2, 2)},
           {out({4, 5})}});
    for (const Case& c : epilogueCases(kBF16, {0}, 6, 8, fusedPass)) h.run(c);
  }
  lt.set(nullptr);

  // Malformed steps: both backends refuse them at bind time with the same message (the CPU's,
  // from exec/linear_epilogue_contract.h or, for two 16-bit types, its bindLowPrecision).
  h.expectSameBindError({"bad linear_bias bias shape",
                         "linear_bias",
                         {},
                         {f32({4, 8}), f32({6, 8}), f32({5})},
                         {out({4, 6})}});
  h.expectSameBindError({"bad linear_grad_weight_bias shapes",
                         "linear_grad_weight_bias",
                         {},
                         {f32({4, 6}), f32({4, 8})},
                         {out({6, 8}), out({8})}});
  h.expectSameBindError({"bad linear_bias bf16 bias shape",
                         "linear_bias",
                         {},
                         {lowp(kBF16, {4, 8}), lowp(kBF16, {6, 8}), f32({5})},
                         {out({4, 6})}});
  h.expectSameBindError({"bad linear_bias_gelu bf16/f16",
                         "linear_bias_gelu",
                         {},
                         {lowp(kBF16, {4, 8}), lowp(kF16, {6, 8}), f32({6})},
                         {out({4, 6}), out({4, 6})}});
  h.expectSameBindError({"bad linear_bias_gelu arity",
                         "linear_bias_gelu",
                         {},
                         {f32({4, 8}), f32({6, 8}), f32({6})},
                         {out({4, 6})}});
  h.expectSameBindError({"bad linear_bias_gelu f16 weight",
                         "linear_bias_gelu",
                         {},
                         {lowp(kF16, {2, 3, 8}), lowp(kF16, {6, 9}), f32({6})},
                         {out({2, 3, 6}), out({2, 3, 6})}});
  h.expectSameBindError({"bad linear_grad_input_gelu pre",
                         "linear_grad_input_gelu",
                         {},
                         {f32({4, 6}), f32({6, 8}), f32({4, 7})},
                         {out({4, 8})}});
  // What the CPU takes by widening every 16-bit operand and the CUDA kernels do not: 16-bit
  // operands other than x, w and a forward op's y (dy and w), x and w of different types, or a
  // 16-bit y other than x's type.
  h.expectBindError({"linear_bias bf16 bias",
                     "linear_bias",
                     {},
                     {lowp(kBF16, {4, 8}), lowp(kBF16, {6, 8}), lowp(kBF16, {6})},
                     {out({4, 6})}},
                    "the bias must be float32 beside bfloat16 operands, got bfloat16");
  h.expectBindError({"linear_grad_input_gelu f32 operands, f16 dx",
                     "linear_grad_input_gelu",
                     {},
                     {f32({4, 6}), f32({6, 8}), f32({4, 8})},
                     {outAs(kF16, {4, 8})}},
                    "dx must be float32 beside float32 operands, got float16");
  h.expectBindError({"linear_bias_gelu f32 operands, bf16 pre",
                     "linear_bias_gelu",
                     {},
                     {f32({4, 8}), f32({6, 8}), f32({6})},
                     {out({4, 6}), outAs(kBF16, {4, 6})}},
                    "a bfloat16 pre needs bfloat16 operands, got float32");
  h.expectBindError({"linear_bias f16 x and w, bf16 y",
                     "linear_bias",
                     {},
                     {lowp(kF16, {4, 8}), lowp(kF16, {6, 8}), f32({6})},
                     {outAs(kBF16, {4, 6})}},
                    "operands must share one element type, got float16 and bfloat16");
  h.expectBindError({"linear_bias_gelu f32 x and w, bf16 y",
                     "linear_bias_gelu",
                     {},
                     {f32({4, 8}), f32({6, 8}), f32({6})},
                     {outAs(kBF16, {4, 6}), out({4, 6})}},
                    "a bfloat16 y needs bfloat16 x and w, got float32");
  h.expectBindError({"linear_bias f32 x and w, f16 y",
                     "linear_bias",
                     {},
                     {f32({4, 8}), f32({6, 8}), f32({6})},
                     {outAs(kF16, {4, 6})}},
                    "a float16 y needs float16 x and w, got float32");
  h.expectBindError({"linear_bias_gelu bf16 x, f32 w",
                     "linear_bias_gelu",
                     {},
                     {lowp(kBF16, {4, 8}), f32({6, 8}), f32({6})},
                     {out({4, 6}), out({4, 6})}},
                    "operands must share one element type, got bfloat16 and float32");
}

}  // namespace dtc::gputest
