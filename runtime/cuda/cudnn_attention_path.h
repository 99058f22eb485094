// Whether a causal attention step on CUDA runs on cuDNN's fused attention (cudnn_attention.h) or
// on dtc's own kernels, settled at bind time for causal_attention(_grad) and
// causal_attention_qkv(_grad) alike: cuDNN where DTC_CUDA_ATTENTION is unset, auto or cudnn, the
// operands are 16-bit, libcudnn loads and offers an engine, and its workspace fits the step's
// planned scratch (a plan compiled for CUDA holds a bound on it, ops/cuda_scratch.h; beyond that
// only when asked for by name). DTC_CUDA_ATTENTION=cudnn makes any refusal a bind error. The
// first such step a process binds says on stderr which path runs, and why not cuDNN.
#pragma once

#include <memory>
#include <string>

#include "cuda_bind.h"
#include "cudnn_attention.h"

namespace dtc::cuda {

// `spec` with its shapes and layout filled in; its element type, scale, direction and
// determinism come from here. `notCudnn`: why the caller's step cannot take cuDNN whatever the
// library offers (float32 operands, a block of the sequence), empty if it can. Null: run dtc's
// kernels.
StatusOr<std::shared_ptr<const CudnnSdpa>> cudnnAttentionPath(const StepContext& ctx, Device& dev,
                                                              DType type, SdpaSpec spec, bool grad,
                                                              const std::string& notCudnn);

// The workspace of a step on cuDNN: its planned scratch when that holds it, else memory of the
// step's own (reported as beyond the plan).
StatusOr<uint8_t*> cudnnWorkspace(const StepContext& ctx, Device& dev, const CudnnSdpa& sdpa);

}  // namespace dtc::cuda
