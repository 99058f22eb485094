// Reads and writes of FloatIn/FloatOut operands (float_data.h): widened as read, rounded once as
// written.
#pragma once

#include "float_data.h"
#include "half.cuh"

namespace dtc::cuda::kernels {

__device__ inline float at(FloatIn x, int64_t i) { return loadAs(x.type, x.data, i); }
__device__ inline void put(FloatOut y, int64_t i, float v) { storeAs(y.type, y.data, i, v); }

}  // namespace dtc::cuda::kernels
