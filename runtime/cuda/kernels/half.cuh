// bfloat16 and IEEE half conversions on the device, bit for bit those of runtime/cpu/half.h
// (round to nearest even; NaN stays NaN with the CPU's payload rule; f16 overflow to inf at
// 65520). Integer arithmetic rather than CUDA's __float2bfloat16_rn and friends, whose NaN
// results are canonical rather than the CPU's: casts must agree to the bit. Included by .cu
// files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dtc::cuda::kernels {

__device__ inline float bf16ToF32(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

__device__ inline uint16_t f32ToBf16(float f) {
  uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ inline float f16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while (!(mantissa & 0x400u)) mantissa <<= 1, ++shift;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return __uint_as_float(bits);
}

__device__ inline uint16_t f32ToF16(float f) {
  const uint32_t bits = __float_as_uint(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in half: value = abs / 2^-24 units, rounded to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | (((rounded >> 23) - 112) << 10) | ((rounded >> 13) & 0x3ffu));
}

}  // namespace dtc::cuda::kernels
