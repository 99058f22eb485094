// Element types the runtime stores. Values match dtc.plan.DType in schema/plan.fbs.
#pragma once

#include <cstddef>
#include <cstdint>
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
