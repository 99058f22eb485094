// The two 8-bit float formats of FP8 training, as stored (one byte) and their float32 values:
// e4m3fn (4 exponent bits, bias 7, no infinity, largest 448, NaN 0x7F) for weights and
// activations, e5m2 (5 exponent bits, bias 15, largest finite 57344) for gradients, as PyTorch's
// float8_e4m3fn and float8_e5m2 and the Hopper tensor cores define them.
//
// Conversion to either rounds to nearest, ties to even, and saturates: a value beyond the largest
// finite one (infinity too) becomes that largest one with its sign, as torchao's casts (a clamp,
// then .to()) and cuBLASLt's saturating conversions do; NaN stays NaN. Plain integer arithmetic,
// compiled for the host and (by nvcc) for the GPU, so both backends quantize bit for bit alike.
#pragma once

#include <cstdint>
#ifndef __CUDACC__
#include <string>
#include <string_view>
#endif

#include "support/half.h"

namespace dtc {

// A format's layout and limits.
template <int kMantissaBits, int kBias, uint32_t kMaxCode, uint32_t kNanCode, bool kHasInfinity>
struct Float8Format {
  static constexpr int mantissaBits = kMantissaBits;
  static constexpr int bias = kBias;
  static constexpr uint32_t maxCode = kMaxCode;  // the largest finite magnitude's code
  static constexpr uint32_t nanCode = kNanCode;
  static constexpr bool hasInfinity = kHasInfinity;
};

using E4M3 = Float8Format<3, 7, 0x7E, 0x7F, false>;
using E5M2 = Float8Format<2, 15, 0x7B, 0x7F, true>;

// The largest finite magnitudes, for scales: amax maps to these.
inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;

// Below this an amax counts as this: a tensor of zeros gets a finite scale.
inline constexpr double kFloat8AmaxFloor = 1e-12;

#ifndef __CUDACC__
// Delayed scaling's amax history of a layer's "input", "weight" or "grad_output": training-step
// state that a run in another precision (or with dynamic scaling) does not have. A checkpoint
// without it starts it anew; a checkpoint with it resumes a run without.
inline std::string fp8AmaxHistoryName(std::string_view layer, std::string_view role) {
  return std::string(layer) + ".fp8_" + std::string(role) + "_amax_history";
}
inline bool isFp8AmaxHistory(std::string_view name) {
  constexpr std::string_view kSuffix = "_amax_history";
  return name.size() > kSuffix.size() && name.find(".fp8_") != std::string_view::npos &&
         name.substr(name.size() - kSuffix.size()) == kSuffix;
}
#endif

// The larger of two amaxes, a NaN kept once either is one: what CUDA's integer maximum of the
// bits of non-negative floats gives (a NaN's bits are above infinity's), on both backends.
DTC_HOST_DEVICE inline float float8AmaxMax(float m, float v) { return m != m || v <= m ? m : v; }

// The amax delayed scaling scales by: the largest of an amax history, or the format's largest
// value `fmax` (scale 1) before any step has recorded one.
DTC_HOST_DEVICE inline float float8HistoryAmax(const float* history, int64_t n, float fmax) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = float8AmaxMax(m, history[i]);
  return m > 0.0f || m != m ? m : fmax;
}

// The per-tensor scale that maps `amax` to `fmax`, as torchao computes it: in double, amax
// floored at kFloat8AmaxFloor, rounded to f32 once. Both backends' quantizations call it.
DTC_HOST_DEVICE inline float float8Scale(float amax, float fmax) {
  const double floored = static_cast<double>(amax) > kFloat8AmaxFloor ? amax : kFloat8AmaxFloor;
  return static_cast<float>(static_cast<double>(fmax) / floored);
}

template <typename Format>
DTC_HOST_DEVICE inline uint8_t f32ToFloat8(float f) {
  constexpr int kMan = Format::mantissaBits;
  constexpr int kDrop = 23 - kMan;
  const uint32_t bits = f32ToBits(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | Format::nanCode);
  const int exponent = static_cast<int>(abs >> 23);  // float32's, biased by 127
  uint32_t code;
  if (exponent < 127 - Format::bias + 1) {
    // Below the smallest normal: a count of the smallest subnormal, 2^(1 - bias - kMan),
    // rounded to nearest even. float32's own subnormals are far below half of it.
    if (exponent == 0) return static_cast<uint8_t>(sign);
    const int shift = (1 - Format::bias - kMan) + 150 - exponent;
    if (shift > 24) return static_cast<uint8_t>(sign);
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    uint32_t count = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (count & 1u))) ++count;
    code = count;  // 1 << kMan, the smallest normal, has this same code
  } else {
    // The mantissa rounded to kMan bits (a carry moves into the exponent), then rebiased.
    const uint32_t rounded = abs + ((1u << (kDrop - 1)) - 1) + ((abs >> kDrop) & 1u);
    const uint32_t biased = (rounded >> 23) - 127 + Format::bias;
    code = biased > 0xffu ? 0xffu : (biased << kMan) | ((rounded >> kDrop) & ((1u << kMan) - 1));
  }
  if (code > Format::maxCode) code = Format::maxCode;
  return static_cast<uint8_t>(sign | code);
}

template <typename Format>
DTC_HOST_DEVICE inline float float8ToF32(uint8_t c) {
  constexpr int kMan = Format::mantissaBits;
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t magnitude = c & 0x7fu;
  const uint32_t exponent = magnitude >> kMan, mantissa = magnitude & ((1u << kMan) - 1);
  constexpr uint32_t kTopExponent = 0x7fu >> kMan;
  if (Format::hasInfinity && exponent == kTopExponent)
    return bitsToF32(sign | 0x7f800000u | (mantissa ? 0x400000u : 0u));
  if (!Format::hasInfinity && magnitude == Format::nanCode) return bitsToF32(sign | 0x7fc00000u);
  if (exponent == 0) {
    // mantissa · 2^(1 - bias - kMan): a small integer times a power of two, exact.
    const float unit = bitsToF32(static_cast<uint32_t>(127 + 1 - Format::bias - kMan) << 23);
    const float value = static_cast<float>(mantissa) * unit;
    return sign ? -value : value;
  }
  return bitsToF32(sign | ((exponent - Format::bias + 127) << 23) | (mantissa << (23 - kMan)));
}

}  // namespace dtc
