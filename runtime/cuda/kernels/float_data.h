// Float data as the CUDA kernels take it: f32, or the 16-bit types of mixed precision.
#pragma once

namespace dtc::cuda::kernels {

// The element types of float data: f32, or the 16-bit types of mixed precision.
enum class Float { kF32, kBF16, kF16 };

// Each float operand f32 or 16-bit (mixed precision's storage; the Float kernels' contract, one
// 16-bit type per step): read widened, which is exact, and written rounded once to nearest even;
// the math is f32 whatever the storage.
struct FloatIn {
  const void* data = nullptr;
  Float type = Float::kF32;
};
struct FloatOut {
  void* data = nullptr;
  Float type = Float::kF32;
};

}  // namespace dtc::cuda::kernels
