// The transformer ops on CUDA (cpu/cpu_transformer_table.cc's): batched GEMMs through cuBLAS,
// softmax and embeddings, with the CPU's contracts (exec/transformer_contracts.h); the layout
// ops are in cuda_layout_table.cc, the norms are in cuda_norm_table.cc, and kernels with a file of
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
DTC_CUDA_BINDER(causal_softmax, bindCausalSoftmax)
DTC_CUDA_BINDER(causal_softmax_grad, bindCausalSoftmaxGrad)
DTC_CUDA_BINDER(softmax, bindSoftmax)
DTC_CUDA_BINDER(softmax_grad, bindSoftmaxGrad)
DTC_CUDA_BINDER(embedding, bindEmbedding)
DTC_CUDA_BINDER(embedding_grad, bindEmbeddingGrad)

}  // namespace dtc::cuda
