// cuDNN's fused flash attention (the cuDNN frontend's SDPA graphs) for causal attention on 16-bit
// operands, each of q, k, v and out a strided [B, H, T, D] view of its buffer (SdpaLayout): the
// fused projection qkv [B, T, 3·H·D] of causal_attention_qkv read in place, causal_attention's
// [B, H, T, D] blocks, or [B, T, H, D] rows; k and v may hold fewer heads (grouped-query
// attention), each serving H / Hk consecutive query heads. The gradients are written in their
// operands' layouts, the log-sum-exp [B, H, T] in f32 as the step's lse. libcudnn is loaded at
// run time, as NCCL is (the frontend's dynamic loading): the plugin loads and dtrun starts where
// it is missing, and the steps then run on dtc's own attention kernels. A graph is built at bind
// time for each spec a process meets (the slow part: cuDNN compiles its kernels) and shared by
// every step of that spec; a run is one execute on the stream, which a CUDA graph captures.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include "cuda_device.h"
#include "support/status.h"

namespace dtc::cuda {

// Elements between consecutive batches, heads, rows and channels of each operand, read as
// [B, H, T, D]: q (and dq), k and v (and their gradients), out (and dout).
struct SdpaLayout {
  std::array<int64_t, 4> q{}, kv{}, out{};
  bool operator<(const SdpaLayout& o) const {
    return std::tie(q, kv, out) < std::tie(o.q, o.kv, o.out);
  }
};
// The fused projection [B, T, 3·H·D] (q, k, v each a third of a row) and out [B, T, H·D].
SdpaLayout packedSdpaLayout(int64_t t, int64_t heads, int64_t d);
// Contiguous [B, H, T, D] blocks (k and v of Hk heads).
SdpaLayout headMajorSdpaLayout(int64_t t, int64_t heads, int64_t kvHeads, int64_t d);
// Contiguous [B, T, H, D] rows (k and v of Hk heads).
SdpaLayout sequenceMajorSdpaLayout(int64_t t, int64_t heads, int64_t kvHeads, int64_t d);

struct SdpaSpec {
  int64_t batch = 0, t = 0, heads = 0, kvHeads = 0, d = 0;
  SdpaLayout layout;
  bool bf16 = true;  // else f16
  float scale = 1.0f;
  bool grad = false;
  // cuDNN's deterministic backward (DTC_CUDNN_DETERMINISTIC=1): no atomics in dq's sum.
  bool deterministic = false;

  bool operator<(const SdpaSpec& o) const {
    return std::tie(batch, t, heads, kvHeads, d, layout, bf16, scale, grad, deterministic) <
           std::tie(o.batch, o.t, o.heads, o.kvHeads, o.d, o.layout, o.bf16, o.scale, o.grad,
                    o.deterministic);
  }
};

class CudnnSdpa {
 public:
  virtual ~CudnnSdpa() = default;
  virtual uint64_t workspaceBytes() const = 0;
  // Forward: (q, k, v) -> out, lse. Backward: (dout, q, k, v, out, lse) -> dq, dk, dv. Each
  // pointer is its operand's first element; the spec's layout places the rest.
  virtual Status forward(cudaStream_t stream, const void* q, const void* k, const void* v,
                         void* out, float* lse, void* workspace,
                         const std::string& where) const = 0;
  virtual Status backward(cudaStream_t stream, const void* dout, const void* q, const void* k,
                          const void* v, const void* out, const float* lse, void* dq, void* dk,
                          void* dv, void* workspace, const std::string& where) const = 0;
};

// Why cuDNN attention cannot run in this process (the library missing or older than 9, the
// plugin built without the frontend's headers), or empty when it can; loads libcudnn
// (DTC_CUDNN_LIBRARY, else libcudnn.so.9 on the library path) on first use.
std::string cudnnUnavailable();
// The loaded cuDNN's version, as "9.19.0" (empty when it is unavailable).
std::string cudnnVersion();

// The graph for `spec` on `device` (built once per process and device, then shared), or null
// where cuDNN is unavailable or offers no engine for it (`refused` says why; the caller then
// runs its own kernels). Errors are cuDNN failing otherwise.
StatusOr<std::shared_ptr<const CudnnSdpa>> planCudnnSdpa(Device& device, const SdpaSpec& spec,
                                                         const std::string& where,
                                                         std::string& refused);

}  // namespace dtc::cuda
