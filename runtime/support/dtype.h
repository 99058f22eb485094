// Element types the runtime stores. Values match dtc.plan.DType in schema/plan.fbs.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace dtc {

enum class DType : int8_t { kF32 = 0, kF16 = 1, kBF16 = 2, kI32 = 3, kI64 = 4 };

inline size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

// Index of the first inf or NaN among `n` elements of `t` at `data`, or -1 (integers are
// always finite). The 16-bit floats are inf or NaN when their exponent bits are all set.
inline int64_t firstNonFinite(const uint8_t* data, int64_t n, DType t) {
  if (t == DType::kF32) {
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      if (!std::isfinite(v)) return i;
    }
  } else if (t == DType::kF16 || t == DType::kBF16) {
    const uint16_t exponent = t == DType::kF16 ? 0x7C00 : 0x7F80;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, data + 2 * i, 2);
      if ((v & exponent) == exponent) return i;
    }
  }
  return -1;
}

// The names PyTorch users know ("float32", "int64").
inline std::string dtypeName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
  }
  return "unknown";
}

}  // namespace dtc
