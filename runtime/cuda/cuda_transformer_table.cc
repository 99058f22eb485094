// The transformer ops on CUDA (cpu/cpu_transformer_table.cc's): batched GEMMs through cuBLAS,
// layout copies, causal softmax and embeddings, with the CPU's contracts
// (exec/transformer_contracts.h); the norms are in cuda_norm_table.cc, and kernels with a file of
// their own (kernels/swiglu.cu, kernels/rotary.cu, kernels/rms_norm.cu) bind there.
#include <array>
#include <climits>

#include "cuda_bind.h"
#include "exec/precision_contracts.h"
#include "exec/transformer_contracts.h"
#include "gemm.h"

namespace dtc::cuda {
namespace {

StatusOr<BoundStep> bindBatchMatmul(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(ContractionTypes types, contractionTypes(ctx));
  DTC_ASSIGN_OR_RETURN(GemmDims g, batchMatmulDims(ctx));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  const size_t r = c.shape.size();
  // The batch from the leading dimensions themselves (not c's size / (m·n), which is 0/0 when
  // m·n is 0).
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d) batch *= c.shape[d];
  GemmShape shape{g.m, g.n, g.k, g.transA, g.transB, batch};
  shape.type = types.type;
  shape.f32Output = types.f32Output;
  const std::string where = ctx.where();
  DTC_RETURN_IF_ERROR(checkGemm(shape, where));
  const void *pa = a.data, *pb = b.data;
  void* pc = c.data;
  cublasHandle_t handle = dev.blas();
  const bool tf32 = dev.tf32();
  return BoundStep([=] { return gemm(handle, tf32, pa, pb, pc, shape, where); });
}

// Layout ops move f32 under the CPU's contract (expect(), the same messages), or (after
// dtc-fold-casts) bf16/f16 elements, one type for every operand. The size of an element.
StatusOr<int> layoutElementBytes(const StepContext& ctx, size_t inputs, size_t outputs) {
  const TensorView* low = nullptr;
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list)
      if (!low && lowPrecision(v.dtype)) low = &v;
  if (!low) {
    // int64 labels move as 8-byte elements (split only: transposes and concats take floats).
    const bool labels = !ctx.inputs.empty() && ctx.inputs[0].dtype == DType::kI64 &&
                        ctx.step.kernel() == plan::Kernel::split;
    if (labels) {
      DTC_ASSIGN_OR_RETURN(const PiecesLayout unused, checkSplit(ctx));
      (void)unused;
      return 8;
    }
    DTC_RETURN_IF_ERROR(expect(ctx, inputs, outputs));
    return 4;
  }
  if (ctx.inputs.size() != inputs || ctx.outputs.size() != outputs)
    return invalid(ctx, "expects " + std::to_string(inputs) + " inputs and " +
                            std::to_string(outputs) + " outputs");
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list)
      if (v.dtype != low->dtype)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low->dtype) +
                                " and " + dtypeName(v.dtype));
  return 2;
}

StatusOr<BoundStep> bindTranspose(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const int bytes, layoutElementBytes(ctx, 1, 1));
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, transposePerm(ctx));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  if (x.shape.size() > static_cast<size_t>(kernels::kMaxDims))
    return invalid(ctx, "rank " + std::to_string(x.shape.size()) +
                            " is above the kernels' limit of " + std::to_string(kernels::kMaxDims));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::transpose(x.data, x.shape, perm, out.data, bytes, stream), where);
  });
}

// The whole seen as [outer, row] bytes around `axis`; part p is [outer, width[p]], starting at
// byte offset[p] of each row.
struct Pieces {
  int64_t outer = 1, row = 0;
  std::vector<int64_t> width, offset;
  Pieces(const Shape& whole, const PiecesLayout& l, int bytes) {
    int64_t inner = bytes;
    for (int64_t d = 0; d < l.axis; ++d) outer *= whole[d];
    for (size_t d = l.axis + 1; d < whole.size(); ++d) inner *= whole[d];
    for (int64_t size : l.sizes) {
      offset.push_back(row);
      width.push_back(size * inner);
      row += size * inner;
    }
  }
};

// Copies part p between the whole and its piece: one strided 2-D copy per part.
Status copyPart(uint8_t* whole, uint8_t* part, const Pieces& s, size_t p, bool toWhole,
                cudaStream_t stream, const std::string& where) {
  const size_t width = s.width[p], pitch = s.row;
  if (s.outer * width == 0) return Status::Ok();
  cudaError_t e = toWhole ? cudaMemcpy2DAsync(whole + s.offset[p], pitch, part, width, width,
                                              s.outer, cudaMemcpyDeviceToDevice, stream)
                          : cudaMemcpy2DAsync(part, width, whole + s.offset[p], pitch, width,
                                              s.outer, cudaMemcpyDeviceToDevice, stream);
  return cudaStatus(e, where + "a strided copy");
}

// split (the input cut into the outputs) and concat (the inputs joined into the output).
template <bool Concat>
StatusOr<BoundStep> bindPieces(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const int bytes, Concat ? layoutElementBytes(ctx, ctx.inputs.size(), 1)
                                               : layoutElementBytes(ctx, 1, ctx.outputs.size()));
  DTC_ASSIGN_OR_RETURN(const PiecesLayout layout, Concat ? concatLayout(ctx) : splitLayout(ctx));
  const TensorView& all = Concat ? ctx.outputs[0] : ctx.inputs[0];
  uint8_t* whole = all.data;
  std::vector<uint8_t*> parts;
  for (const TensorView& t : Concat ? ctx.inputs : ctx.outputs) parts.push_back(t.data);
  const Pieces s(all.shape, layout, bytes);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    for (size_t p = 0; p < parts.size(); ++p)
      DTC_RETURN_IF_ERROR(copyPart(whole, parts[p], s, p, Concat, stream, where));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalSoftmax(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(CausalSoftmaxDims d, checkCausalSoftmax(ctx));
  const float* x = ctx.inputs[0].f32();
  float* y = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::causalSoftmax(x, y, d.batch, d.t, d.scale, stream), where); });
}

StatusOr<BoundStep> bindCausalSoftmaxGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(CausalSoftmaxDims d, checkCausalSoftmaxGrad(ctx));
  const float *dy = ctx.inputs[0].f32(), *y = ctx.inputs[1].f32();
  float* dx = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::causalSoftmaxGrad(dy, y, dx, d.batch, d.t, d.scale, stream), where);
  });
}

StatusOr<BoundStep> bindSoftmax(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(SoftmaxDims d, checkSoftmax(ctx));
  const float* x = ctx.inputs[0].f32();
  float* y = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::softmax(x, y, d.rows, d.n, d.scale, d.log, stream), where); });
}

StatusOr<BoundStep> bindSoftmaxGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(SoftmaxDims d, checkSoftmaxGrad(ctx));
  const float *dy = ctx.inputs[0].f32(), *y = ctx.inputs[1].f32();
  float* dx = ctx.outputs[0].f32();
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::softmaxGrad(dy, y, dx, d.rows, d.n, d.scale, d.log, stream), where);
  });
}

StatusOr<BoundStep> bindEmbedding(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(EmbeddingDims e, checkEmbedding(ctx));
  TensorView table = ctx.inputs[0], ids = ctx.inputs[1], out = ctx.outputs[0];
  // (offset, total) = (0, vocab) unless the table is a block of one split over devices.
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, e.vocab));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, tokenOutsideMessage(block.second, true)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::embedding(table.f32(), ids.i64(), out.f32(), ids.numElements(),
                                       e.vocab, e.dim, block.first, block.second, bad, stream),
                    where);
  });
}

StatusOr<BoundStep> bindEmbeddingGrad(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(EmbeddingDims e, checkEmbeddingGrad(ctx));
  TensorView dy = ctx.inputs[0], ids = ctx.inputs[1], dtable = ctx.outputs[0];
  const int64_t n = ids.numElements();
  if (n > INT_MAX) return invalid(ctx, "more than 2^31 ids (the sort's limit)");
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, e.vocab));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, tokenOutsideMessage(block.second, false)));
  // CUB's exact need, within the plan's bound (kernels::embeddingGradScratchBound) when planned.
  const uint64_t bytes = kernels::embeddingGradScratchBytes(n, block.second);
  DTC_ASSIGN_OR_RETURN(void* scratch, stepScratch(ctx, dev, bytes));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  // nn.Embedding's padding_idx: its row's gradient is zero (on the device holding it).
  const int64_t paddingRow =
      ctx.hasAttr("padding_idx") ? ctx.intAttr("padding_idx") - block.first : -1;
  const bool padded = paddingRow >= 0 && paddingRow < e.vocab;
  return BoundStep([=] {
    DTC_RETURN_IF_ERROR(
        launched(kernels::embeddingGrad(dy.f32(), ids.i64(), dtable.f32(), n, e.vocab, e.dim,
                                        block.first, block.second, scratch, bytes, bad, stream),
                 where));
    if (!padded) return Status::Ok();
    return cudaStatus(
        cudaMemsetAsync(dtable.f32() + paddingRow * e.dim, 0, e.dim * sizeof(float), stream),
        where + "clearing the padding row");
  });
}

}  // namespace

DTC_CUDA_BINDER(batch_matmul, bindBatchMatmul)
DTC_CUDA_BINDER(transpose, bindTranspose)
DTC_CUDA_BINDER(split, bindPieces<false>)
DTC_CUDA_BINDER(concat, bindPieces<true>)
DTC_CUDA_BINDER(causal_softmax, bindCausalSoftmax)
DTC_CUDA_BINDER(causal_softmax_grad, bindCausalSoftmaxGrad)
DTC_CUDA_BINDER(softmax, bindSoftmax)
DTC_CUDA_BINDER(softmax_grad, bindSoftmaxGrad)
DTC_CUDA_BINDER(embedding, bindEmbedding)
DTC_CUDA_BINDER(embedding_grad, bindEmbeddingGrad)

}  // namespace dtc::cuda
