// Byte sizes and regions shared by memory planning and the plan writer.
#pragma once

#include "mlir/IR/BuiltinTypes.h"

namespace dtc {

inline constexpr int64_t kStateRegion = 0;  // dtc.plan.Region.state
inline constexpr int64_t kArenaRegion = 1;  // dtc.plan.Region.arena
inline constexpr int64_t kAlignment = 64;   // every buffer starts on a cache line

inline int64_t alignTo(int64_t bytes, int64_t alignment = kAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

inline int64_t elementBytes(mlir::Type t) { return (t.getIntOrFloatBitWidth() + 7) / 8; }

inline int64_t alignedBytes(mlir::RankedTensorType t) {
  return alignTo(std::max<int64_t>(1, t.getNumElements() * elementBytes(t.getElementType())));
}

}  // namespace dtc
