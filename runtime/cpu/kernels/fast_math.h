// erf and exp for float32 kernels as branch-free arithmetic that compilers vectorise (libm's
// erff and expf are scalar calls, ten times the cost of the loop around them).
//   fastErf: a rational approximation on [-4, 4] (erf is ±1 in float beyond), odd numerator of
//            degree 13 over an even denominator of degree 8; absolute error below 5e-7, as
//            PyTorch's own vectorised erf (Abramowitz–Stegun, 1.5e-7) is an absolute bound.
//   fastExp: exp(x) = 2^n · e^r with n = round(x / ln 2) and |r| ≤ ln2/2, e^r by a degree-7
//            polynomial (Cephes' expf); within 1 ulp over [-87.3, 88.7] and saturating beyond
//            (about 1.2e-38 below, 3.4e38 above: callers that need 0 or inf do not use it).
//   fastTanh: Cephes' tanhf: an odd polynomial below |x| = 0.625, 1 − 2/(e^{2|x|} + 1) above
//            (no cancellation there); within 2 ulp, ±1 beyond |x| ≈ 9, NaN stays NaN.
// Clamps are written as selects without other control flow, which GCC if-converts for every
// vector width.
#pragma once

#include <cstdint>
#include <cstring>

namespace dtc::cpu {

// A loop function compiled once per vector width the machine may have (the loader picks one).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DTC_VECTOR_CLONES
#endif

inline float clampTo(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}

inline float fastErf(float x) {
  x = clampTo(x, -4.0f, 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

inline float fastExp(float x) {
  x = clampTo(x, -87.33654022216797f, 88.72283935546875f);
  // n = round(x / ln 2): adding and subtracting 1.5·2^23 rounds to an integer in float.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // r = x − n·ln 2, ln 2 in two parts so that the product is exact.
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  // 2^n in the exponent field (n in [-126, 128]: 2^n · e^r is split in two halves so that
  // n = 128 does not overflow the field).
  const int32_t half = static_cast<int32_t>(n) >> 1;
  const int32_t bitsA = (half + 127) << 23, bitsB = (static_cast<int32_t>(n) - half + 127) << 23;
  float a, b;
  std::memcpy(&a, &bitsA, 4);
  std::memcpy(&b, &bitsB, 4);
  return er * a * b;
}

inline float fastTanh(float x) {
  const float a = x < 0.0f ? -x : x;
  float large = 1.0f - 2.0f / (fastExp(2.0f * a) + 1.0f);
  large = x < 0.0f ? -large : large;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x == 0.0f ? x : p * z * x + x;  // keeps −0's sign
  return a >= 0.625f ? large : small;
}

// out[i] = exp(scale·x[i] − shift), vectorised; out may be x.
void expShifted(const float* x, float scale, float shift, float* out, int64_t n);
// Σ exp(x[i] − shift) in double, summed in order (the exps vectorised a chunk at a time).
double sumExpShifted(const float* x, int64_t n, float shift);

}  // namespace dtc::cpu
