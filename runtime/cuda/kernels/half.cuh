// bfloat16 and IEEE half conversions on the device: runtime/cpu/kernels/half.h's, compiled for the
// GPU, so casts agree with the CPU backend to the bit (NaN payloads included). Included by .cu
// files.
#pragma once

#include "cpu/kernels/half.h"

namespace dtc::cuda::kernels {

using cpu::bf16ToF32;
using cpu::f16ToF32;
using cpu::f32ToBf16;
using cpu::f32ToF16;

}  // namespace dtc::cuda::kernels
