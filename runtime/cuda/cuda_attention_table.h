// The fused attention ops on CUDA (cuda_attention_table.cc): causal_attention and
// causal_attention_grad on the flash-attention kernels (f32, and 16-bit when forced or when the
// scores do not fit the scratch budget) or, for 16-bit operands, on tensor-core GEMMs with the
// [T, T] scores in scratch only; a table of their own beside the ones cuda_device.h declares.
#pragma once

#include "cuda_device.h"

namespace dtc::cuda {

const CudaBinderTable& attentionCudaBinders();  // cuda_attention_table.cc

}  // namespace dtc::cuda
