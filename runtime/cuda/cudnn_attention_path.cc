#include "cudnn_attention_path.h"

#include <cstdio>
#include <mutex>

#include "support/runtime_options.h"

namespace dtc::cuda {
namespace {

void reportPath(const std::string& line) {
  static std::once_flag once;
  std::call_once(once, [&] { std::fprintf(stderr, "dtrun: attention %s\n", line.c_str()); });
}

}  // namespace

StatusOr<std::shared_ptr<const CudnnSdpa>> cudnnAttentionPath(const StepContext& ctx, Device& dev,
                                                              DType type, SdpaSpec spec, bool grad,
                                                              const std::string& notCudnn) {
  if (!runtimeOptionsStatus().ok()) return invalid(ctx, runtimeOptionsStatus().status().message());
  const RuntimeOptions::Attention wanted = runtimeOptions().cudaAttention;
  using A = RuntimeOptions::Attention;
  if (wanted == A::kFlash || wanted == A::kGemm) {
    reportPath("on dtc's kernels (DTC_CUDA_ATTENTION chose them)");
    return std::shared_ptr<const CudnnSdpa>();
  }
  std::string refused = notCudnn;
  std::shared_ptr<const CudnnSdpa> plan;
  if (refused.empty() && type == DType::kF32)
    refused = "cuDNN's fused attention takes bf16/f16 operands, not float32";
  if (refused.empty()) {
    spec.bf16 = type == DType::kBF16;
    spec.scale = static_cast<float>(ctx.floatAttr("scale"));
    spec.grad = grad;
    spec.deterministic = runtimeOptions().cudnnDeterministic;
    DTC_ASSIGN_OR_RETURN(plan, planCudnnSdpa(dev, spec, ctx.where(), refused));
  }
  if (plan && ctx.scratch && plan->workspaceBytes() > ctx.scratchBytes && wanted != A::kCudnn) {
    refused = "its workspace of " + std::to_string(plan->workspaceBytes()) +
              " bytes exceeds the step's planned scratch of " + std::to_string(ctx.scratchBytes);
    plan.reset();
  }
  if (!plan && wanted == A::kCudnn) return invalid(ctx, "DTC_CUDA_ATTENTION=cudnn: " + refused);
  reportPath(plan ? "on cuDNN " + cudnnVersion() + "'s fused flash attention" +
                        (runtimeOptions().cudnnDeterministic ? " (deterministic backward)" : "")
                  : "on dtc's kernels (cuDNN: " + refused + ")");
  return plan;
}

StatusOr<uint8_t*> cudnnWorkspace(const StepContext& ctx, Device& dev, const CudnnSdpa& sdpa) {
  return stepScratch(ctx, dev, sdpa.workspaceBytes());
}

}  // namespace dtc::cuda
