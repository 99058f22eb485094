// FP8 training's kernels on CUDA against the CPU's exact emulation: quantization bit for bit
// (the amax, torchao's scale and the saturating rounding of support/float8.h, with and without
// the transposed copy, from f32 and bf16, to e4m3fn and e5m2, at sizes that leave partial blocks);
// the scaled GEMM through cuBLASLt's FP8 kernels in the three pairings training uses (e4m3 by
// e4m3 forward, e5m2 gradients by e4m3 operands backward) to f32 and bf16, within f32 sums'
// differences; and the contracts' refusals, named alike on both backends.
#include "harness.h"

namespace dtc::gputest {
namespace {

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kE4M3 = DType::kF8E4M3,
                kE5M2 = DType::kF8E5M2;

std::string name(DType t) {
  return t == kE4M3 ? "e4m3" : t == kE5M2 ? "e5m2" : t == kBF16 ? "bf16" : "f32";
}

Case quantize(DType from, DType to, int64_t rows, int64_t cols, bool transposed) {
  Case c{"fp8_quantize " + name(from) + " to " + name(to) + (transposed ? " with q_t" : ""),
         "fp8_quantize",
         {},
         {from == kF32 ? f32({rows, cols}, -3, 5) : lowp(from, {rows, cols}, -3, 5)},
         {outAs(to, {rows, cols}), out({1})}};
  if (transposed) c.outputs.push_back(outAs(to, {cols, rows}));
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
  for (DType to : {kE4M3, kE5M2})
    for (DType from : {kF32, kBF16})
      for (bool transposed : {false, true})
        cases.push_back(quantize(from, to, 300, 96, transposed));
  cases.push_back(quantize(kF32, kE4M3, 1, 7, true));
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
       {f32({4, 8})},
       {outAs(kE4M3, {4, 8}), out({1}), outAs(kE4M3, {4, 8})}},
      {"fp8_quantize to bf16", "fp8_quantize", {}, {f32({4, 8})}, {outAs(kBF16, {4, 8}), out({1})}},
  };
}

}  // namespace dtc::gputest
