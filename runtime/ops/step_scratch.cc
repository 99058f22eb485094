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

bool anyLowPrecision(const ScratchStep& s) {
  for (const auto* list : {&s.inputs, &s.outputs})
    for (const ScratchOperand& t : *list)
      if (lowPrecision(t.dtype)) return true;
  return false;
}

// The sizers kernels.def names in its DTC_KERNEL_*_SCRATCH lines.

// Operand `at` of `list`, counting from the end below 0; null where there is none.
const ScratchOperand* operandAt(const std::vector<ScratchOperand>& list, int at) {
  const int n = static_cast<int>(list.size());
  const int i = at < 0 ? n + at : at;
  return i >= 0 && i < n ? &list[i] : nullptr;
}

// reduce_sum: the CUDA reduction plan's partial sums.
uint64_t reductionPlan(const ScratchStep& s) {
  if (s.inputs.empty()) return 0;
  std::vector<int64_t> axes;
  for (int64_t a : s.intsAttr("axes"))
    if (a >= 0 && a < static_cast<int64_t>(s.inputs[0].shape.size())) axes.push_back(a);
  cuda::kernels::ReducePlan plan;
  return cuda::kernels::makeReducePlan(s.inputs[0].shape, axes, plan) ? plan.scratchBytes() : 0;
}

// conv2d and its gradients: the im2col columns (and the weight gradient's partial sums).
uint64_t im2colColumns(const ScratchStep& s) {
  const auto& in = s.inputs;
  const auto& out = s.outputs;
  if (in.size() != 2 || out.size() != 1) return 0;
  // As the contract reads them: x, w, y.
  const Kernel op = s.kernel->kernel;
  const auto& x = op == Kernel::conv2d              ? in[0].shape
                  : op == Kernel::conv2d_grad_input ? out[0].shape
                                                    : in[1].shape;
  const auto& w = op == Kernel::conv2d_grad_weight ? out[0].shape : in[1].shape;
  const auto& y = op == Kernel::conv2d ? out[0].shape : in[0].shape;
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return 0;
  return cuda::kernels::convScratch(x[0], x[1] * w[2] * w[3], y[2] * y[3], w[0],
                                    op == Kernel::conv2d_grad_weight)
      .bytes;
}

// causal_attention(_grad): the score buffers, or cuDNN's workspace where it runs the step.
uint64_t attentionScores(const ScratchStep& s) {
  namespace k = cuda::kernels;
  const auto& in = s.inputs;
  const bool grad = s.kernel->kernel == Kernel::causal_attention_grad;
  const size_t q = grad ? 1 : 0;
  if (in.size() <= q || in[q].shape.size() < 2) return 0;
  const int64_t t = in[q].shape[in[q].shape.size() - 2], d = in[q].shape.back();
  if (t == 0 || d == 0) return 0;
  const int64_t slices = static_cast<int64_t>(in[q].elements()) / (t * d);
  // A block of the sequence (context parallelism) takes the flash kernels, never the GEMMs
  // or cuDNN.
  const bool blocks =
      (s.intsAttr && !s.intsAttr("seq_axes").empty()) || (s.intAttr && s.intAttr("seq_chunks") > 0);
  const bool low = lowPrecision(in[q].dtype) && !blocks;
  const uint64_t own = k::attentionScratchBytes(slices, t, low, grad);
  if (!low) return own;
  // cuDNN reads [B, H, T, D]: the heads are the dimension before T, k's its own.
  const auto& qs = in[q].shape;
  const int64_t heads = qs.size() >= 3 ? qs[qs.size() - 3] : 1;
  const auto& ks = in.size() > q + 1 ? in[q + 1].shape : qs;
  const int64_t kvHeads = ks.size() >= 3 ? ks[ks.size() - 3] : heads;
  if (heads <= 0) return own;
  return std::max(own, k::cudnnAttentionWorkspaceBound(slices / heads, heads, t, d, grad, kvHeads));
}

// causal_attention_qkv(_grad): the heads unpacked in the operands' type, then the unpacked
// step's own scratch.
uint64_t packedAttentionScores(const ScratchStep& s) {
  namespace k = cuda::kernels;
  const PackedAttentionDims a = packedDims(s);
  if (a.block() == 0) return 0;
  const bool grad = s.kernel->kernel == Kernel::causal_attention_qkv_grad;
  const bool low = lowPrecision(s.inputs[grad ? 1 : 0].dtype);
  const uint64_t own = packedAttentionScratch(a, low ? 2 : sizeof(float), grad).inner +
                       k::attentionScratchBytes(a.batch * a.heads, a.t, low, grad);
  if (!low) return own;
  return std::max(own,
                  k::cudnnAttentionWorkspaceBound(a.batch, a.heads, a.t, a.d, grad, a.kvHeads));
}

// On the CPU, the packed heads unpacked (after the widened copies).
uint64_t unpackedHeads(const ScratchStep& s) {
  return packedAttentionScratch(packedDims(s), sizeof(float),
                                s.kernel->kernel == Kernel::causal_attention_qkv_grad)
      .inner;
}

// A norm's weight gradient as column sums over row chunks: rows from the operand `rowsAt`
// (mean or rstd, one per row), the width from the weight at `widthAt`.
uint64_t normGradColumns(const ScratchStep& s, int rowsAt, int widthAt) {
  const ScratchOperand* rows = operandAt(s.inputs, rowsAt);
  const ScratchOperand* width = operandAt(s.inputs, widthAt);
  if (!rows || !width) return 0;
  return cuda::kernels::layerNormGradScratchBytes(static_cast<int64_t>(rows->elements()),
                                                  static_cast<int64_t>(width->elements()));
}

// dy given in parts ahead of `fixed` other inputs (dy₁, …, dyₚ, x, …): on the CPU, more than
// one part is summed into a float32 copy of x's size first.
uint64_t summedParts(const ScratchStep& s, int fixed) {
  const int parts = static_cast<int>(s.inputs.size()) - fixed;
  if (parts <= 1) return 0;
  return widenedCopyBytes(s.inputs[parts].elements());
}

// embedding_grad (dy, ids): the sort of the ids.
uint64_t embeddingGradSort(const ScratchStep& s) {
  if (s.inputs.size() != 2) return 0;
  return cuda::kernels::embeddingGradScratchBound(static_cast<int64_t>(s.inputs[1].elements()));
}

// A loss's double per row of logits [rows, classes].
uint64_t doublePerRow(const ScratchStep& s) {
  if (s.inputs.empty() || s.inputs[0].shape.empty()) return 0;
  return static_cast<uint64_t>(std::max<int64_t>(s.inputs[0].shape[0], 0)) * sizeof(double);
}

// A sum over all elements: a double per block.
uint64_t blockSums(const ScratchStep&) { return cuda::kernels::kSumBlocks * sizeof(double); }

// Where cuBLASLt does not fuse the epilogue, a 16-bit output `at` (y, dx) is the GEMM's f32 sum
// rounded (linear_bias_gelu keeps it in pre, its second output, where that is f32).
uint64_t unfusedEpilogueSum(const ScratchStep& s, int at) {
  const ScratchOperand* out = operandAt(s.outputs, at);
  if (!out || !lowPrecision(out->dtype)) return 0;
  return out->elements() * sizeof(float);
}

// linear_grad_weight_bias (dy [..., N], x): dy's column sums, unfused.
uint64_t columnSums(const ScratchStep& s) {
  if (s.inputs.empty() || s.inputs[0].shape.empty() || s.inputs[0].shape.back() <= 0) return 0;
  const int64_t n = s.inputs[0].shape.back();
  return cuda::kernels::columnSumScratchBytes(static_cast<int64_t>(s.inputs[0].elements()) / n, n);
}

// fp8_gemm (a, b, scales) -> out on the CPU: a and b widened to f32, and a 16-bit out's f32
// sum before its rounding.
uint64_t widenedFp8Gemm(const ScratchStep& s) {
  if (s.inputs.size() != 4 || s.outputs.size() != 1) return 0;
  const uint64_t out = lowPrecision(s.outputs[0].dtype) ? s.outputs[0].elements() : 0;
  return widenedCopyBytes(s.inputs[0].elements()) + widenedCopyBytes(s.inputs[1].elements()) +
         (out ? widenedCopyBytes(out) : 0);
}

// A collective's blocks packed contiguous.
uint64_t packedBlocks(const ScratchStep& s) { return collectivePackingFloats(s) * sizeof(float); }

// The CUDA kernels' own scratch for the step's float32 form (collectives: after widening).
uint64_t cudaKernelBytes(const ScratchStep& s) {
  switch (s.kernel->kernel) {
// clang-format off
#define DTC_KERNEL_CUDA_SCRATCH(name, bytes) case Kernel::name: return bytes;
#include "ops/kernels.def"
    // clang-format on
    default: return 0;
  }
}

// What a kernel needs on the CPU besides the widened copies and a collective's packing.
uint64_t cpuKernelBytes(const ScratchStep& s) {
  switch (s.kernel->kernel) {
// clang-format off
#define DTC_KERNEL_CPU_SCRATCH(name, bytes) case Kernel::name: return bytes;
#include "ops/kernels.def"
    // clang-format on
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
  bytes += cpuKernelBytes(s);
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
