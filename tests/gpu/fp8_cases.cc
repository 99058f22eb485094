// FP8 training's kernels on CUDA against the CPU's exact emulation: the amax and quantization
// bit for bit (torchao's scale and the saturating rounding of support/float8.h, with and without
// the transposed copy, from f32 and bf16, to e4m3fn and e5m2, at sizes that leave partial blocks,
// of a matrix and of a [B, T, C] batch); the scaled GEMM through cuBLASLt's FP8 kernels in the
// three pairings training uses (e4m3 by e4m3 forward, e5m2 gradients by e4m3 operands backward) to
// f32 and bf16, within f32 sums' differences; and the contracts' refusals, named alike on both
// backends.
#include "exec/bind_util.h"
#include "harness.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kE4M3 = DType::kF8E4M3,
                kE5M2 = DType::kF8E5M2;

std::string name(DType t) {
  return t == kE4M3 ? "e4m3" : t == kE5M2 ? "e5m2" : t == kBF16 ? "bf16" : "f32";
}

Input source(DType from, const Shape& shape) {
  return from == kF32 ? f32(shape, -3, 5) : lowp(from, shape, -3, 5);
}

Case amax(DType from, const Shape& shape) {
  Case c{"fp8_amax " + name(from) + " " + dtc::str(shape),
         "fp8_amax",
         {},
         {source(from, shape)},
         {out({1})}};
  c.bitwise = true;
  return c;
}

// On an amax of 4.75: x's own is below 5, as an all-reduced one may be above a rank's.
Case quantize(DType from, DType to, const Shape& shape, bool transposed) {
  Case c{"fp8_quantize " + name(from) + " to " + name(to) + " " + dtc::str(shape) +
             (transposed ? " with q_t" : ""),
         "fp8_quantize",
         {},
         {source(from, shape), given({1}, {4.75f})},
         {outAs(to, shape), out({1})}};
  if (transposed) {
    Shape t = {shape.back()};
    t.insert(t.end(), shape.begin(), shape.end() - 1);
    c.outputs.push_back(outAs(to, t));
  }
  c.bitwise = true;
  return c;
}

Case gemm(DType a, DType b, DType outType, int64_t m, int64_t n, int64_t k) {
  Case c{"fp8_gemm " + name(a) + " x " + name(b) + " to " + name(outType),
         "fp8_gemm",
         {},
         {fp8Codes(a, {m, k}), fp8Codes(b, {n, k}), given({1}, {0.013f}), given({1}, {2.5e-4f})},
         {outAs(outType, {m, n})}};
  // Sums of exact products in f32 in another order (and by the tensor cores' accumulation).
  c.tolerance = outType == kF32 ? 1e-4 : 1e-2;
  c.maxUlps = -1;
  return c;
}

}  // namespace

std::vector<Case> fp8Cases() {
  std::vector<Case> cases;
  for (DType from : {kF32, kBF16}) {
    cases.push_back(amax(from, {300, 96}));
    cases.push_back(amax(from, {3, 1000, 7}));
  }
  for (DType to : {kE4M3, kE5M2})
    for (DType from : {kF32, kBF16})
      for (bool transposed : {false, true})
        cases.push_back(quantize(from, to, {300, 96}, transposed));
  cases.push_back(quantize(kF32, kE4M3, {1, 7}, true));
  cases.push_back(quantize(kBF16, kE5M2, {3, 37, 48}, true));
  // A float32 x rounded to bf16 as it is loaded (a folded cast).
  Case viaBf16 = quantize(kF32, kE4M3, {300, 96}, true);
  viaBf16.label += " loading bf16";
  viaBf16.attrs = {intAttr("load_bf16", 1)};
  cases.push_back(viaBf16);
  Case amaxViaBf16 = amax(kF32, {3, 1000, 7});
  amaxViaBf16.label += " loading bf16";
  amaxViaBf16.attrs = {intAttr("load_bf16", 1)};
  cases.push_back(amaxViaBf16);
  // Delayed scaling: the codes on a history's amax with x's own recorded, the history's amax
  // (scale 1 before any) and its push.
  Case recorded = quantize(kBF16, kE4M3, {300, 96}, true);
  recorded.label = "fp8_quantize_recorded bf16 to e4m3 with q_t";
  recorded.op = "fp8_quantize_recorded";
  recorded.outputs.insert(recorded.outputs.begin() + 2, out({1}));
  cases.push_back(recorded);
  for (std::vector<float> history : {std::vector<float>{0, 0, 0}, std::vector<float>{3, 0.5f, 7}}) {
    Case c{"fp8_history_amax of " + std::string(history[0] > 0 ? "a history" : "zeros"),
           "fp8_history_amax",
           {floatAttr("fmax", 448.0)},
           {given({3}, history)},
           {out({1})}};
    c.bitwise = true;
    cases.push_back(c);
  }
  Case push{"fp8_history_push of two amaxes",
            "fp8_history_push",
            {},
            {given({3}, {3, 0.5f, 7}), given({1}, {2.0f}), given({1}, {9.0f})},
            {out({3})}};
  push.bitwise = true;
  cases.push_back(push);
  // FP8 codes transposed as bytes: the transposed copy made after an FP8 all-gather.
  Case transposed{"transpose of e4m3 codes [6, 40, 48] to [48, 6, 40]",
                  "transpose",
                  {intsAttr("perm", {2, 0, 1})},
                  {fp8Codes(kE4M3, {6, 40, 48})},
                  {outAs(kE4M3, {48, 6, 40})}};
  transposed.bitwise = true;
  cases.push_back(transposed);
  // A weight gradient's form: contracted over two dimensions.
  Case twice = gemm(kE5M2, kE4M3, kF32, 64, 128, 0);
  twice.label = "fp8_gemm e5m2 x e4m3 over two contracted dimensions";
  twice.inputs[0] = fp8Codes(kE5M2, {64, 4, 48});
  twice.inputs[1] = fp8Codes(kE4M3, {128, 4, 48});
  twice.attrs = {intAttr("contract_dims", 2)};
  cases.push_back(twice);
  for (DType outType : {kF32, kBF16}) {
    cases.push_back(gemm(kE4M3, kE4M3, outType, 256, 128, 64));
    cases.push_back(gemm(kE5M2, kE4M3, outType, 64, 128, 256));
    cases.push_back(gemm(kE4M3, kE5M2, outType, 128, 64, 256));
  }
  return cases;
}

std::vector<Case> fp8MalformedCases() {
  return {
      {"fp8_gemm e5m2 x e5m2",
       "fp8_gemm",
       {},
       {fp8Codes(kE5M2, {16, 32}), fp8Codes(kE5M2, {16, 32}), given({1}, {1.0f}),
        given({1}, {1.0f})},
       {out({16, 16})}},
      {"fp8_gemm K differs",
       "fp8_gemm",
       {},
       {fp8Codes(kE4M3, {16, 32}), fp8Codes(kE4M3, {16, 16}), given({1}, {1.0f}),
        given({1}, {1.0f})},
       {out({16, 16})}},
      {"fp8_quantize q_t shape",
       "fp8_quantize",
       {},
       {f32({4, 8}), given({1}, {1.0f})},
       {outAs(kE4M3, {4, 8}), out({1}), outAs(kE4M3, {4, 8})}},
      {"fp8_quantize to bf16",
       "fp8_quantize",
       {},
       {f32({4, 8}), given({1}, {1.0f})},
       {outAs(kBF16, {4, 8}), out({1})}},
      {"fp8_quantize without an amax",
       "fp8_quantize",
       {},
       {f32({4, 8})},
       {outAs(kE4M3, {4, 8}), out({1})}},
  };
}

}  // namespace dtc::gputest
