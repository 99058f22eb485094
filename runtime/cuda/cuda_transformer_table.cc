// The transformer ops on CUDA (exec/cpu_transformer_table.cc's): batched GEMMs through cuBLAS,
// layout copies, causal softmax, LayerNorm and embeddings, with the CPU's contracts.
#include <climits>

#include "cuda_bind.h"
#include "gemm.h"

namespace dtc::cuda {
namespace {

StatusOr<BoundStep> bindBatchMatmul(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(cudaDataType_t type, contractionType(ctx));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  size_t r = a.shape.size();
  if (r < 3 || b.shape.size() != r || c.shape.size() != r ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin()) ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, c.shape.begin()))
    return invalid(ctx, "needs operands of one rank >= 3 with equal batch dimensions");
  bool tA = ctx.intAttr("transpose_lhs") != 0, tB = ctx.intAttr("transpose_rhs") != 0;
  int64_t m = tA ? a.shape[r - 1] : a.shape[r - 2], k = tA ? a.shape[r - 2] : a.shape[r - 1];
  int64_t kb = tB ? b.shape[r - 1] : b.shape[r - 2], n = tB ? b.shape[r - 2] : b.shape[r - 1];
  if (k != kb || c.shape[r - 2] != m || c.shape[r - 1] != n)
    return invalid(ctx, "shapes " + str(a.shape) + ", " + str(b.shape) + " -> " + str(c.shape) +
                            " do not match");
  // The batch from the leading dimensions themselves (not c's size / (m·n), which is 0/0 when
  // m·n is 0).
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d) batch *= c.shape[d];
  GemmShape shape{m, n, k, tA, tB, batch};
  shape.type = type;
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
      if (!low && (v.dtype == DType::kBF16 || v.dtype == DType::kF16)) low = &v;
  if (!low) {
    DTC_RETURN_IF_ERROR(expect(ctx, inputs, outputs));
    return 4;
  }
  if (ctx.inputs.size() != inputs || ctx.outputs.size() != outputs)
    return invalid(ctx, "expects " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) + " outputs");
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& v : *list)
      if (v.dtype != low->dtype)
        return invalid(ctx, "operands must share one element type, got " + dtypeName(low->dtype) + " and " +
                                dtypeName(v.dtype));
  return 2;
}

StatusOr<BoundStep> bindTranspose(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const int bytes, layoutElementBytes(ctx, 1, 1));
  TensorView x = ctx.inputs[0], out = ctx.outputs[0];
  std::vector<int64_t> perm = ctx.intsAttr("perm");
  if (perm.size() != x.shape.size()) return invalid(ctx, "perm does not match the rank");
  std::vector<bool> seen(perm.size(), false);
  Shape expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)perm.size() || seen[p]) return invalid(ctx, "perm is not a permutation");
    seen[p] = true;
    expected.push_back(x.shape[p]);
  }
  if (expected != out.shape) return invalid(ctx, "output " + str(out.shape) + " does not match");
  if (x.shape.size() > static_cast<size_t>(kernels::kMaxDims))
    return invalid(ctx, "rank " + std::to_string(x.shape.size()) + " is above the kernels' limit of " +
                            std::to_string(kernels::kMaxDims));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep(
      [=] { return launched(kernels::transpose(x.data, x.shape, perm, out.data, bytes, stream), where); });
}

// The shape of one piece when `whole` is cut into `parts` along `axis`, or empty if impossible.
Shape pieceShape(const Shape& whole, int64_t axis, int64_t parts) {
  if (axis < 0 || axis >= (int64_t)whole.size() || parts <= 0 || whole[axis] % parts) return {};
  Shape piece = whole;
  piece[axis] /= parts;
  return piece;
}

// The whole seen as [outer, parts, piece] elements around `axis`: part p is [outer, piece].
struct Pieces {
  int64_t outer = 1, piece = 1, parts = 1, elementBytes = 4;
  Pieces(const Shape& whole, int64_t axis, int64_t n, int bytes) : parts(n), elementBytes(bytes) {
    for (int64_t d = 0; d < axis; ++d) outer *= whole[d];
    for (size_t d = axis; d < whole.size(); ++d) piece *= whole[d];
    piece /= n;
  }
};

// Copies part p between the whole and its piece: one strided 2-D copy per part.
Status copyPart(uint8_t* whole, uint8_t* part, const Pieces& s, int64_t p, bool toWhole, cudaStream_t stream,
                const std::string& where) {
  if (s.outer * s.piece == 0) return Status::Ok();
  const size_t width = s.piece * s.elementBytes, pitch = s.parts * width;
  cudaError_t e = toWhole ? cudaMemcpy2DAsync(whole + p * width, pitch, part, width, width, s.outer,
                                              cudaMemcpyDeviceToDevice, stream)
                          : cudaMemcpy2DAsync(part, width, whole + p * width, pitch, width, s.outer,
                                              cudaMemcpyDeviceToDevice, stream);
  return cudaStatus(e, where + "a strided copy");
}

StatusOr<BoundStep> bindSplit(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const int bytes, layoutElementBytes(ctx, 1, ctx.outputs.size()));
  TensorView x = ctx.inputs[0];
  int64_t axis = ctx.intAttr("axis");
  Shape piece = pieceShape(x.shape, axis, static_cast<int64_t>(ctx.outputs.size()));
  std::vector<uint8_t*> outs;
  for (const TensorView& out : ctx.outputs) {
    if (piece.empty() || out.shape != piece) return invalid(ctx, "pieces do not match the input");
    outs.push_back(out.data);
  }
  const Pieces s(x.shape, axis, static_cast<int64_t>(outs.size()), bytes);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    for (size_t p = 0; p < outs.size(); ++p)
      DTC_RETURN_IF_ERROR(copyPart(x.data, outs[p], s, static_cast<int64_t>(p), false, stream, where));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindConcat(const StepContext& ctx, Device& dev) {
  DTC_ASSIGN_OR_RETURN(const int bytes, layoutElementBytes(ctx, ctx.inputs.size(), 1));
  TensorView out = ctx.outputs[0];
  int64_t axis = ctx.intAttr("axis");
  Shape piece = pieceShape(out.shape, axis, static_cast<int64_t>(ctx.inputs.size()));
  std::vector<uint8_t*> parts;
  for (const TensorView& in : ctx.inputs) {
    if (piece.empty() || in.shape != piece) return invalid(ctx, "pieces do not match the output");
    parts.push_back(in.data);
  }
  const Pieces s(out.shape, axis, static_cast<int64_t>(parts.size()), bytes);
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    for (size_t p = 0; p < parts.size(); ++p)
      DTC_RETURN_IF_ERROR(copyPart(out.data, parts[p], s, static_cast<int64_t>(p), true, stream, where));
    return Status::Ok();
  });
}

// [..., T, T] scores: returns T, or 0 if the shape is not square in its last two dimensions.
int64_t squareScores(const TensorView& x) {
  size_t r = x.shape.size();
  if (r < 2 || x.shape[r - 1] != x.shape[r - 2]) return 0;
  return x.shape[r - 1];
}

StatusOr<BoundStep> bindCausalSoftmax(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  int64_t t = squareScores(x);
  if (t == 0) return invalid(ctx, "needs [..., T, T] scores, got " + str(x.shape));
  int64_t batch = x.numElements() / (t * t);
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] { return launched(kernels::causalSoftmax(x.f32(), y.f32(), batch, t, scale, stream), where); });
}

StatusOr<BoundStep> bindCausalSoftmaxGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView dy = ctx.inputs[0], y = ctx.inputs[1], dx = ctx.outputs[0];
  int64_t t = squareScores(y);
  if (t == 0) return invalid(ctx, "needs [..., T, T] scores, got " + str(y.shape));
  int64_t batch = y.numElements() / (t * t);
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::causalSoftmaxGrad(dy.f32(), y.f32(), dx.f32(), batch, t, scale, stream), where);
  });
}

// x [..., C] with per-row statistics [...]: returns C, or 0 if the shapes disagree.
int64_t layerNormWidth(const TensorView& x, const TensorView& w, const TensorView& mean) {
  if (x.shape.empty() || w.shape != Shape{x.shape.back()} ||
      mean.shape != Shape(x.shape.begin(), x.shape.end() - 1))
    return 0;
  return x.shape.back();
}

// y may be bf16/f16: the f32 result rounded once (dtc-fold-casts folds the cast that fed a
// 16-bit contraction into the LayerNorm); the rest is the CPU's f32 contract.
StatusOr<BoundStep> bindLayerNorm(const StepContext& ctx, Device& dev) {
  kernels::Float yType = kernels::Float::kF32;
  StepContext f32 = ctx;
  if (ctx.outputs.size() == 3 && (ctx.outputs[0].dtype == DType::kBF16 || ctx.outputs[0].dtype == DType::kF16)) {
    yType = ctx.outputs[0].dtype == DType::kBF16 ? kernels::Float::kBF16 : kernels::Float::kF16;
    f32.outputs[0].dtype = DType::kF32;
  }
  DTC_RETURN_IF_ERROR(expect(f32, 3, 3));
  TensorView x = ctx.inputs[0], w = ctx.inputs[1], b = ctx.inputs[2];
  TensorView y = ctx.outputs[0], mean = ctx.outputs[1], rstd = ctx.outputs[2];
  int64_t c = layerNormWidth(x, w, mean);
  if (c == 0 || b.shape != w.shape || y.shape != x.shape || rstd.shape != mean.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  int64_t rows = mean.numElements();
  float eps = static_cast<float>(ctx.floatAttr("eps"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::layerNorm(x.f32(), w.f32(), b.f32(), y.data, yType, mean.f32(), rstd.f32(), rows, c,
                                       eps, stream),
                    where);
  });
}

StatusOr<BoundStep> bindLayerNormGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], w = ctx.inputs[2];
  TensorView mean = ctx.inputs[3], rstd = ctx.inputs[4];
  TensorView dx = ctx.outputs[0], dw = ctx.outputs[1], db = ctx.outputs[2];
  int64_t c = layerNormWidth(x, w, mean);
  if (c == 0 || dy.shape != x.shape || dx.shape != x.shape || rstd.shape != mean.shape ||
      dw.shape != w.shape || db.shape != w.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  int64_t rows = mean.numElements();
  DTC_ASSIGN_OR_RETURN(void* scratch, dev.scratch(kernels::layerNormGradScratchBytes(rows, c)));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::layerNormGrad(dy.f32(), x.f32(), w.f32(), mean.f32(), rstd.f32(), dx.f32(), dw.f32(),
                                           db.f32(), rows, c, scratch, stream),
                    where);
  });
}

StatusOr<BoundStep> bindEmbedding(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  TensorView table = ctx.inputs[0], ids = ctx.inputs[1], out = ctx.outputs[0];
  Shape expected = ids.shape;
  if (table.shape.size() != 2) return invalid(ctx, "table must be [vocab, dim]");
  expected.push_back(table.shape[1]);
  if (out.shape != expected) return invalid(ctx, "output " + str(out.shape) + " does not match");
  int64_t vocab = table.shape[0], dim = table.shape[1];
  // (offset, total) = (0, vocab) unless the table is a block of one split over devices.
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, vocab));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, "a token id is outside [0, " + std::to_string(block.second) +
                                                             ") (the data does not fit the model's vocabulary)"));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::embedding(table.f32(), ids.i64(), out.f32(), ids.numElements(), vocab, dim, block.first,
                                       block.second, bad, stream),
                    where);
  });
}

StatusOr<BoundStep> bindEmbeddingGrad(const StepContext& ctx, Device& dev) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  TensorView dy = ctx.inputs[0], ids = ctx.inputs[1], dtable = ctx.outputs[0];
  Shape expected = ids.shape;
  if (dtable.shape.size() != 2) return invalid(ctx, "gradient must be [vocab, dim]");
  expected.push_back(dtable.shape[1]);
  if (dy.shape != expected) return invalid(ctx, "dy " + str(dy.shape) + " does not match the ids");
  int64_t vocab = dtable.shape[0], dim = dtable.shape[1], n = ids.numElements();
  if (n > INT_MAX) return invalid(ctx, "more than 2^31 ids (the sort's limit)");
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, vocab));
  DTC_ASSIGN_OR_RETURN(int* bad, dataErrorFlag(dev, ctx, "a token id is outside [0, " + std::to_string(block.second) + ")"));
  const uint64_t bytes = kernels::embeddingGradScratchBytes(n, block.second);
  DTC_ASSIGN_OR_RETURN(void* scratch, dev.scratch(bytes));
  cudaStream_t stream = dev.stream();
  const std::string where = ctx.where();
  return BoundStep([=] {
    return launched(kernels::embeddingGrad(dy.f32(), ids.i64(), dtable.f32(), n, vocab, dim, block.first,
                                           block.second, scratch, bytes, bad, stream),
                    where);
  });
}

}  // namespace

const CudaBinderTable& transformerCudaBinders() {
  static const CudaBinderTable table = {
      {"batch_matmul", bindBatchMatmul},
      {"transpose", bindTranspose},
      {"split", bindSplit},
      {"concat", bindConcat},
      {"causal_softmax", bindCausalSoftmax},
      {"causal_softmax_grad", bindCausalSoftmaxGrad},
      {"layer_norm", bindLayerNorm},
      {"layer_norm_grad", bindLayerNormGrad},
      {"embedding", bindEmbedding},
      {"embedding_grad", bindEmbeddingGrad},
  };
  return table;
}

}  // namespace dtc::cuda
