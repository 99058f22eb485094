// bfloat16 and IEEE half conversions on the device: runtime/support/half.h's, compiled for the
// GPU, so casts agree with the CPU backend to the bit (NaN payloads included). Included by .cu
// files.
#pragma once

#include <cstdint>

#include "launchers.h"  // Float
#include "support/half.h"

namespace dtc::cuda::kernels {

using dtc::bf16ToF32;
using dtc::f16ToF32;
using dtc::f32ToBf16;
using dtc::f32ToF16;

// Element i of float data stored as T, read as f32 (widening is exact) or written from f32
// (rounded to nearest even, as the CPU's casts).
template <Float T>
__device__ inline float load(const void* p, int64_t i) {
  if constexpr (T == Float::kF32)
    return static_cast<const float*>(p)[i];
  else if constexpr (T == Float::kBF16)
    return bf16ToF32(static_cast<const uint16_t*>(p)[i]);
  else
    return f16ToF32(static_cast<const uint16_t*>(p)[i]);
}

template <Float T>
__device__ inline void store(void* p, int64_t i, float v) {
  if constexpr (T == Float::kF32)
    static_cast<float*>(p)[i] = v;
  else if constexpr (T == Float::kBF16)
    static_cast<uint16_t*>(p)[i] = f32ToBf16(v);
  else
    static_cast<uint16_t*>(p)[i] = f32ToF16(v);
}

// The same with the type chosen per launch rather than per instantiation.
__device__ inline float loadAs(Float t, const void* p, int64_t i) {
  if (t == Float::kF32) return static_cast<const float*>(p)[i];
  const uint16_t bits = static_cast<const uint16_t*>(p)[i];
  return t == Float::kBF16 ? bf16ToF32(bits) : f16ToF32(bits);
}

__device__ inline void storeAs(Float t, void* p, int64_t i, float v) {
  if (t == Float::kF32)
    static_cast<float*>(p)[i] = v;
  else if (t == Float::kBF16)
    static_cast<uint16_t*>(p)[i] = f32ToBf16(v);
  else
    static_cast<uint16_t*>(p)[i] = f32ToF16(v);
}

}  // namespace dtc::cuda::kernels
