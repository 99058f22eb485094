// cuDNN's fused flash attention (the cuDNN frontend's SDPA graphs) for causal_attention_qkv and
// its gradient: q, k and v read as strided views of the fused projection qkv [B, T, 3·H·D], the
// output written with its heads merged [B, T, H·D], dq, dk and dv written into dqkv's layout,
// the log-sum-exp [B, H, T] in f32 as the step's lse. libcudnn is loaded at run time, as NCCL is
// (the frontend's dynamic loading): the plugin loads and dtrun starts where it is missing, and
// the steps then run on dtc's own attention kernels. A graph is built for each step at bind
// time (the slow part: cuDNN compiles its kernels); a run is one execute on the stream, which a
// CUDA graph captures.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cuda_device.h"
#include "support/status.h"

namespace dtc::cuda {

struct SdpaSpec {
  int64_t batch = 0, t = 0, heads = 0, d = 0;
  bool bf16 = true;  // else f16
  float scale = 1.0f;
  bool grad = false;
  // cuDNN's deterministic backward (DTC_CUDNN_DETERMINISTIC=1): no atomics in dq's sum.
  bool deterministic = false;
};

class CudnnSdpa {
 public:
  virtual ~CudnnSdpa() = default;
  virtual uint64_t workspaceBytes() const = 0;
  // Forward: qkv -> out, lse. Backward: (dout, qkv, out, lse) -> dqkv.
  virtual Status forward(cudaStream_t stream, const void* qkv, void* out, float* lse,
                         void* workspace, const std::string& where) const = 0;
  virtual Status backward(cudaStream_t stream, const void* dout, const void* qkv, const void* out,
                          const float* lse, void* dqkv, void* workspace,
                          const std::string& where) const = 0;
};

// Why cuDNN attention cannot run in this process (the library missing or older than 9, the
// plugin built without the frontend's headers), or empty when it can; loads libcudnn
// (DTC_CUDNN_LIBRARY, else libcudnn.so.9 on the library path) on first use.
std::string cudnnUnavailable();
// The loaded cuDNN's version, as "9.19.0" (empty when it is unavailable).
std::string cudnnVersion();

// The graph for `spec` on `device`, or null where cuDNN is unavailable or offers no engine for
// it (`refused` says why; the caller then runs its own kernels). Errors are cuDNN failing
// otherwise.
StatusOr<std::shared_ptr<const CudnnSdpa>> planCudnnSdpa(Device& device, const SdpaSpec& spec,
                                                         const std::string& where,
                                                         std::string& refused);

}  // namespace dtc::cuda
