// bfloat16 and IEEE half precision as stored (16-bit words) and their float32 values.
// Conversions to the narrow types round to nearest, ties to even, as PyTorch's .to() does.
// Plain integer arithmetic, compiled for the host and (by nvcc) for the GPU, so both backends
// convert bit for bit alike (CUDA's own __float2bfloat16_rn gives canonical NaNs instead).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define DTC_HOST_DEVICE __host__ __device__
#else
#define DTC_HOST_DEVICE
#endif

namespace dtc {

DTC_HOST_DEVICE inline float bitsToF32(uint32_t bits) {
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

DTC_HOST_DEVICE inline uint32_t f32ToBits(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof bits);
  return bits;
}

DTC_HOST_DEVICE inline float bf16ToF32(uint16_t h) {
  return bitsToF32(static_cast<uint32_t>(h) << 16);
}

DTC_HOST_DEVICE inline uint16_t f32ToBf16(float f) {
  uint32_t bits = f32ToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

DTC_HOST_DEVICE inline float f16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
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
  return bitsToF32(bits);
}

DTC_HOST_DEVICE inline uint16_t f32ToF16(float f) {
  uint32_t bits = f32ToBits(f);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in half: value = abs / 2^-24 units, rounded to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1), midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | (((rounded >> 23) - 112) << 10) | ((rounded >> 13) & 0x3ffu));
}

}  // namespace dtc
