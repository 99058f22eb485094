// bfloat16 and IEEE half conversions on the device: runtime/support/half.h's, compiled for the
// GPU, so casts agree with the CPU backend to the bit (NaN payloads included). Included by .cu
// files.
#pragma once

#include "support/half.h"

namespace dtc::cuda::kernels {

using dtc::bf16ToF32;
using dtc::f16ToF32;
using dtc::f32ToBf16;
using dtc::f32ToF16;

}  // namespace dtc::cuda::kernels
