#include "ops/step_scratch.h"

#include <algorithm>

#include "ops/cuda_scratch.h"
#include "ops/packed_attention.h"

namespace dtc {
namespace {

bool lowPrecision(DType t) { return t == DType::kBF16 || t == DType::kF16; }

uint64_t alignScratch(uint64_t bytes) {
  return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// causal_attention_qkv(_grad)'s dimensions from qkv [B, T, 3·H·D], or q [B, T, H·D] and k
// [B, T, Hk·D], and `heads` (zeros if they do not hold).
PackedAttentionDims packedDims(const ScratchStep& s) {
  const bool grad = s.kernel->kernel == Kernel::causal_attention_qkv_grad;
  const size_t at = grad ? 1 : 0;
  const bool three = s.inputs.size() == (grad ? 6u : 3u);
  const int64_t heads = s.intAttr ? s.intAttr("heads") : 0, parts = three ? 1 : 3;
  if (s.inputs.size() <= at || heads <= 0) return {};
  const std::vector<int64_t>& q = s.inputs[at].shape;
  if (q.size() != 3 || q[0] <= 0 || q[1] <= 0 || q[2] <= 0 || q[2] % (parts * heads) != 0)
    return {};
  const int64_t d = q[2] / (parts * heads);
  int64_t kvHeads = heads;
  if (three) {
    const std::vector<int64_t>& k = s.inputs[at + 1].shape;
    if (k.size() != 3 || k[2] <= 0 || k[2] % d != 0 || heads % (k[2] / d) != 0) return {};
    kvHeads = k[2] / d;
  }
  return {q[0], q[1], heads, d, kvHeads};
}

bool packedAttention(const ScratchStep& s) {
  return s.kernel->kernel == Kernel::causal_attention_qkv ||
         s.kernel->kernel == Kernel::causal_attention_qkv_grad;
}

bool anyLowPrecision(const ScratchStep& s) {
  for (const auto* list : {&s.inputs, &s.outputs})
    for (const ScratchOperand& t : *list)
      if (lowPrecision(t.dtype)) return true;
  return false;
}

// The CUDA kernels' own scratch for the step's float32 form (collectives: after widening).
uint64_t cudaKernelBytes(const ScratchStep& s) {
  namespace k = cuda::kernels;
  const auto& in = s.inputs;
  const auto& out = s.outputs;
  switch (s.kernel->kernel) {
    case Kernel::reduce_sum: {
      if (in.empty()) return 0;
      std::vector<int64_t> axes;
      for (int64_t a : s.intsAttr("axes"))
        if (a >= 0 && a < static_cast<int64_t>(in[0].shape.size())) axes.push_back(a);
      k::ReducePlan plan;
      return k::makeReducePlan(in[0].shape, axes, plan) ? plan.scratchBytes() : 0;
    }
    case Kernel::conv2d:
    case Kernel::conv2d_grad_input:
    case Kernel::conv2d_grad_weight: {
      if (in.size() != 2 || out.size() != 1) return 0;
      // As the contract reads them: x, w, y.
      const Kernel op = s.kernel->kernel;
      const auto& x = op == Kernel::conv2d              ? in[0].shape
                      : op == Kernel::conv2d_grad_input ? out[0].shape
                                                        : in[1].shape;
      const auto& w = op == Kernel::conv2d_grad_weight ? out[0].shape : in[1].shape;
      const auto& y = op == Kernel::conv2d ? out[0].shape : in[0].shape;
      if (x.size() != 4 || w.size() != 4 || y.size() != 4) return 0;
      return k::convScratch(x[0], x[1] * w[2] * w[3], y[2] * y[3], w[0],
                            op == Kernel::conv2d_grad_weight)
          .bytes;
    }
    case Kernel::causal_attention:
    case Kernel::causal_attention_grad: {
      const bool grad = s.kernel->kernel == Kernel::causal_attention_grad;
      const size_t q = grad ? 1 : 0;
      if (in.size() <= q || in[q].shape.size() < 2) return 0;
      const int64_t t = in[q].shape[in[q].shape.size() - 2], d = in[q].shape.back();
      if (t == 0 || d == 0) return 0;
      const int64_t slices = static_cast<int64_t>(in[q].elements()) / (t * d);
      // A block of the sequence (context parallelism) takes the flash kernels, never the GEMMs
      // or cuDNN.
      const bool blocks = (s.intsAttr && !s.intsAttr("seq_axes").empty()) ||
                          (s.intAttr && s.intAttr("seq_chunks") > 0);
      const bool low = lowPrecision(in[q].dtype) && !blocks;
      const uint64_t own = k::attentionScratchBytes(slices, t, low, grad);
      if (!low) return own;
      // cuDNN reads [B, H, T, D]: the heads are the dimension before T, k's its own.
      const auto& qs = in[q].shape;
      const int64_t heads = qs.size() >= 3 ? qs[qs.size() - 3] : 1;
      const auto& ks = in.size() > q + 1 ? in[q + 1].shape : qs;
      const int64_t kvHeads = ks.size() >= 3 ? ks[ks.size() - 3] : heads;
      if (heads <= 0) return own;
      return std::max(own,
                      k::cudnnAttentionWorkspaceBound(slices / heads, heads, t, d, grad, kvHeads));
    }
    case Kernel::causal_attention_qkv:
    case Kernel::causal_attention_qkv_grad: {
      // The heads unpacked in the operands' type, then the unpacked step's own scratch.
      const PackedAttentionDims a = packedDims(s);
      if (a.block() == 0) return 0;
      const bool grad = s.kernel->kernel == Kernel::causal_attention_qkv_grad;
      const bool low = lowPrecision(in[grad ? 1 : 0].dtype);
      const uint64_t own = packedAttentionScratch(a, low ? 2 : sizeof(float), grad).inner +
                           k::attentionScratchBytes(a.batch * a.heads, a.t, low, grad);
      if (!low) return own;
      return std::max(own,
                      k::cudnnAttentionWorkspaceBound(a.batch, a.heads, a.t, a.d, grad, a.kvHeads));
    }
    case Kernel::layer_norm_grad:      // (dy, x, w, mean, rstd): rows of mean, width of w
    case Kernel::layer_norm_grad_add:  // (dy, x, w, mean, rstd, dres)
      if (in.size() < 5) return 0;
      return k::layerNormGradScratchBytes(static_cast<int64_t>(in[3].elements()),
                                          static_cast<int64_t>(in[2].elements()));
    case Kernel::rms_norm_grad:  // (dy, x, w, rstd): rows of rstd, width of w
      if (in.size() < 4) return 0;
      return k::layerNormGradScratchBytes(static_cast<int64_t>(in[3].elements()),
                                          static_cast<int64_t>(in[2].elements()));
    case Kernel::rms_norm_grad_add:  // (dy₁, …, dyₚ, x, w, rstd, dres)
      if (in.size() < 5) return 0;
      return k::layerNormGradScratchBytes(static_cast<int64_t>(in[in.size() - 2].elements()),
                                          static_cast<int64_t>(in[in.size() - 3].elements()));
    case Kernel::embedding_grad:  // (dy, ids)
      if (in.size() != 2) return 0;
      return k::embeddingGradScratchBound(static_cast<int64_t>(in[1].elements()));
    case Kernel::softmax_cross_entropy:  // a double per row of logits [rows, classes]
    case Kernel::softmax_cross_entropy_with_grad:
    case Kernel::nll_loss:
      if (in.empty() || in[0].shape.empty()) return 0;
      return static_cast<uint64_t>(std::max<int64_t>(in[0].shape[0], 0)) * sizeof(double);
    case Kernel::mse:
    case Kernel::sum_squares:
    case Kernel::nonfinite_count: return k::kSumBlocks * sizeof(double);
    case Kernel::linear_bias:
    case Kernel::linear_bias_gelu:
    case Kernel::linear_grad_input_gelu:
      // Where cuBLASLt does not fuse the epilogue, a 16-bit y (dx) is the f32 result rounded:
      // the GEMM's f32 sum (linear_bias_gelu keeps it in pre where that is f32).
      if (s.kernel->kernel == Kernel::linear_bias_gelu)
        return out.size() == 2 && lowPrecision(out[1].dtype) ? out[1].elements() * sizeof(float)
                                                             : 0;
      if (out.empty() || !lowPrecision(out[0].dtype)) return 0;
      return out[0].elements() * sizeof(float);
    case Kernel::linear_grad_weight_bias: {  // (dy [..., N], x): dy's column sums, unfused
      if (in.empty() || in[0].shape.empty() || in[0].shape.back() <= 0) return 0;
      const int64_t n = in[0].shape.back();
      return k::columnSumScratchBytes(static_cast<int64_t>(in[0].elements()) / n, n);
    }
    case Kernel::all_gather:
    case Kernel::reduce_scatter:
    case Kernel::all_to_all: return collectivePackingFloats(s) * sizeof(float);
    default: return 0;
  }
}

}  // namespace

int64_t outerOf(const std::vector<int64_t>& shape, int64_t dim) {
  if (dim < 0 || dim >= static_cast<int64_t>(shape.size())) return 0;
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  return outer;
}

uint64_t ScratchOperand::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

uint64_t cpuStepScratchBytes(const ScratchStep& s) {
  if (!s.kernel) return 0;
  uint64_t bytes = 0;
  for (const auto* list : {&s.inputs, &s.outputs})
    for (const ScratchOperand& t : *list)
      if (lowPrecision(t.dtype)) bytes += widenedCopyBytes(t.elements());
  if (!cpuWidens(*s.kernel, anyLowPrecision(s))) bytes = 0;
  // Attention on the fused projection unpacks the (widened) heads after the copies.
  if (packedAttention(s))
    bytes += packedAttentionScratch(packedDims(s), sizeof(float),
                                    s.kernel->kernel == Kernel::causal_attention_qkv_grad)
                 .inner;
  // rms_norm_grad_add sums the parts of dy (dy₁, …, dyₚ, x, w, rstd, dres) before the gradient.
  if (s.kernel->kernel == Kernel::rms_norm_grad_add && s.inputs.size() > 5)
    bytes += widenedCopyBytes(s.inputs[s.inputs.size() - 4].elements());
  const uint64_t packed = cpuCollectiveFloats(s);
  return bytes + (packed ? widenedCopyBytes(packed) : 0);
}

uint64_t cpuCollectiveFloats(const ScratchStep& s) {
  if (!s.kernel) return 0;
  if (s.kernel->kernel == Kernel::all_reduce && s.inputs.size() > 1) {
    uint64_t floats = 0;  // a bucket, packed end to end for one call
    for (const ScratchOperand& t : s.inputs) floats += t.elements();
    return floats;
  }
  return collectivePackingFloats(s);
}

uint64_t widenedCollectiveBytes(const ScratchStep& s) {
  if (!s.kernel || s.kernel->family != KernelFamily::kCollective ||
      s.kernel->types != KernelTypes::kFloat || !anyLowPrecision(s))
    return 0;
  uint64_t floats = 0;
  for (const auto* list : {&s.inputs, &s.outputs})
    for (const ScratchOperand& t : *list) floats += t.elements();
  return cuda::kernels::alignPiece(floats * sizeof(float));
}

uint64_t collectivePackingFloats(const ScratchStep& s) {
  if (!s.kernel || s.inputs.size() != 1 || s.outputs.size() != 1) return 0;
  const ScratchOperand &in = s.inputs[0], &out = s.outputs[0];
  // The collectives that only move data move int64 as two float32 words each.
  const uint64_t words = in.dtype == DType::kI64 ? 2 : 1;
  switch (s.kernel->kernel) {
    case Kernel::all_gather:  // rank r's block of out is contiguous only when nothing precedes dim
      return outerOf(out.shape, s.intAttr("dim")) > 1 ? words * out.elements() : 0;
    case Kernel::reduce_scatter: return outerOf(in.shape, s.intAttr("dim")) > 1 ? in.elements() : 0;
    case Kernel::all_to_all:  // the blocks sent, then the blocks received
      return outerOf(in.shape, s.intAttr("split_dim")) > 1 ||
                     outerOf(out.shape, s.intAttr("concat_dim")) > 1
                 ? 2 * words * in.elements()
                 : 0;
    default: return 0;
  }
}

uint64_t cudaStepScratchBytes(const ScratchStep& s) {
  if (!s.kernel) return 0;
  return alignScratch(widenedCollectiveBytes(s) + cudaKernelBytes(s));
}

bool usesBlasWorkspace(const KernelInfo& kernel) {
  return kernel.family == KernelFamily::kGemm || kernel.family == KernelFamily::kConv ||
         kernel.kernel == Kernel::causal_attention ||
         kernel.kernel == Kernel::causal_attention_grad ||
         kernel.kernel == Kernel::causal_attention_qkv ||
         kernel.kernel == Kernel::causal_attention_qkv_grad;
}

}  // namespace dtc
