// Memory a step uses besides its operands, planned by the compiler with the operands (the
// step's scratch_offset/scratch_bytes in its function's arena), so that a plan's memory is all a
// device allocates.
//
// Today that is the CPU's widened copies: a kernel declared for float types (KernelTypes::kFloat)
// runs on bf16/f16 operands through float32 copies of them, one per 16-bit input and then per
// 16-bit output, in operand order, each starting on a kScratchAlign boundary. The compiler sizes
// them from the op's tensor types, the CPU backend lays them out the same way.
#pragma once

#include <cstdint>

#include "ops/kernel_registry.h"

namespace dtc {

inline constexpr uint64_t kScratchAlign = 64;

// The bytes of one float32 copy of `elements` values, rounded up to the alignment.
inline uint64_t widenedCopyBytes(uint64_t elements) {
  return (elements * sizeof(float) + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// Whether the CPU runs `kernel` on widened copies, given whether any operand is 16-bit.
inline bool cpuWidens(const KernelInfo& kernel, bool anyLowPrecisionOperand) {
  return kernel.types == KernelTypes::kFloat && anyLowPrecisionOperand;
}

}  // namespace dtc
