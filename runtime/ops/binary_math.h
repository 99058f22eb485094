// The element-wise binary ops (add, sub, mul, div with NumPy broadcasting) and their scalar
// math, compiled into both backends so the CPU's loops and the CUDA kernels compute each element
// by the same expression.
#pragma once

#include "ops/pointwise_math.h"  // DTC_POINTWISE_FN

namespace dtc {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

template <BinaryOp Op>
DTC_POINTWISE_FN float binaryMath(float x, float y) {
  if constexpr (Op == BinaryOp::kAdd) return x + y;
  if constexpr (Op == BinaryOp::kSub) return x - y;
  if constexpr (Op == BinaryOp::kDiv) return x / y;
  return x * y;
}

}  // namespace dtc
