// Kernel contracts and bindings of the transformer ops (see cpu/transformer_kernels.h).
#include "cpu/transformer_kernels.h"
#include "exec/bind_util.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindBatchMatmul(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
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
  int64_t batch = c.numElements() / std::max<int64_t>(m * n, 1);
  float *pa = a.f32(), *pb = b.f32(), *pc = c.f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchMatmul(pa, pb, pc, batch, m, n, k, tA, tB, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindTranspose(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
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
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::transpose(x.f32(), x.shape, perm, out.f32(), *pool);
    return Status::Ok();
  });
}

// The shape of one piece when `whole` is cut into `parts` along `axis`, or empty if impossible.
Shape pieceShape(const Shape& whole, int64_t axis, int64_t parts) {
  if (axis < 0 || axis >= (int64_t)whole.size() || parts <= 0 || whole[axis] % parts) return {};
  Shape piece = whole;
  piece[axis] /= parts;
  return piece;
}

StatusOr<BoundStep> bindSplit(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, ctx.outputs.size()));
  TensorView x = ctx.inputs[0];
  int64_t axis = ctx.intAttr("axis");
  Shape piece = pieceShape(x.shape, axis, static_cast<int64_t>(ctx.outputs.size()));
  std::vector<float*> outs;
  for (const TensorView& out : ctx.outputs) {
    if (piece.empty() || out.shape != piece) return invalid(ctx, "pieces do not match the input");
    outs.push_back(out.f32());
  }
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::split(x.f32(), x.shape, axis, outs, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindConcat(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, ctx.inputs.size(), 1));
  TensorView out = ctx.outputs[0];
  int64_t axis = ctx.intAttr("axis");
  Shape piece = pieceShape(out.shape, axis, static_cast<int64_t>(ctx.inputs.size()));
  std::vector<const float*> parts;
  for (const TensorView& in : ctx.inputs) {
    if (piece.empty() || in.shape != piece) return invalid(ctx, "pieces do not match the output");
    parts.push_back(in.f32());
  }
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::concat(parts, out.shape, axis, out.f32(), *pool);
    return Status::Ok();
  });
}

// [..., T, T] scores: returns T, or 0 if the shape is not square in its last two dimensions.
int64_t squareScores(const TensorView& x) {
  size_t r = x.shape.size();
  if (r < 2 || x.shape[r - 1] != x.shape[r - 2]) return 0;
  return x.shape[r - 1];
}

StatusOr<BoundStep> bindCausalSoftmax(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  int64_t t = squareScores(x);
  if (t == 0) return invalid(ctx, "needs [..., T, T] scores, got " + str(x.shape));
  int64_t batch = x.numElements() / (t * t);
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalSoftmax(x.f32(), y.f32(), batch, t, scale, *pool);
    return Status::Ok();
  });
}

// q, k, v (and dout, out) [..., T, D] with lse [..., T]: (slices, T, D), or zeros if q is not.
std::array<int64_t, 3> attentionDims(const TensorView& q) {
  if (q.shape.size() < 2) return {0, 0, 0};
  int64_t t = q.shape[q.shape.size() - 2], d = q.shape.back();
  if (t == 0 || d == 0) return {0, 0, 0};
  return {q.numElements() / (t * d), t, d};
}

StatusOr<BoundStep> bindCausalAttention(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2));
  TensorView q = ctx.inputs[0], k = ctx.inputs[1], v = ctx.inputs[2], out = ctx.outputs[0],
             lse = ctx.outputs[1];
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, k));
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, v));
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, out));
  auto [slices, t, d] = attentionDims(q);
  if (slices == 0 || lse.numElements() != slices * t)
    return invalid(ctx, "needs q, k, v, out [..., T, D] and lse [..., T], got " + str(q.shape) +
                            " and " + str(lse.shape));
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalAttention(q.f32(), k.f32(), v.f32(), out.f32(), lse.f32(), slices, t, d, scale, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalAttentionGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 6, 3));
  const TensorView& q = ctx.inputs[1];
  for (size_t i : {0, 2, 3, 4}) DTC_RETURN_IF_ERROR(sameShape(ctx, q, ctx.inputs[i]));
  for (const TensorView& g : ctx.outputs) DTC_RETURN_IF_ERROR(sameShape(ctx, q, g));
  auto [slices, t, d] = attentionDims(q);
  if (slices == 0 || ctx.inputs[5].numElements() != slices * t)
    return invalid(ctx, "needs [..., T, D] operands and lse [..., T], got " + str(q.shape) + " and " +
                            str(ctx.inputs[5].shape));
  std::vector<TensorView> in = ctx.inputs, out = ctx.outputs;
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalAttentionGrad(in[0].f32(), in[1].f32(), in[2].f32(), in[3].f32(), in[4].f32(),
                             in[5].f32(), out[0].f32(), out[1].f32(), out[2].f32(), slices, t, d,
                             scale, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalSoftmaxGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  TensorView dy = ctx.inputs[0], y = ctx.inputs[1], dx = ctx.outputs[0];
  int64_t t = squareScores(y);
  if (t == 0) return invalid(ctx, "needs [..., T, T] scores, got " + str(y.shape));
  int64_t batch = y.numElements() / (t * t);
  float scale = static_cast<float>(ctx.floatAttr("scale"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalSoftmaxGrad(dy.f32(), y.f32(), dx.f32(), batch, t, scale, *pool);
    return Status::Ok();
  });
}

// x [..., C] with per-row statistics [...]: returns C, or 0 if the shapes disagree.
int64_t layerNormWidth(const TensorView& x, const TensorView& w, const TensorView& mean) {
  if (x.shape.empty() || w.shape != Shape{x.shape.back()} ||
      mean.shape != Shape(x.shape.begin(), x.shape.end() - 1))
    return 0;
  return x.shape.back();
}

StatusOr<BoundStep> bindLayerNorm(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 3));
  TensorView x = ctx.inputs[0], w = ctx.inputs[1], b = ctx.inputs[2];
  TensorView y = ctx.outputs[0], mean = ctx.outputs[1], rstd = ctx.outputs[2];
  int64_t c = layerNormWidth(x, w, mean);
  if (c == 0 || b.shape != w.shape || y.shape != x.shape || rstd.shape != mean.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  int64_t rows = mean.numElements();
  float eps = static_cast<float>(ctx.floatAttr("eps"));
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::layerNorm(x.f32(), w.f32(), b.f32(), y.f32(), mean.f32(), rstd.f32(), rows, c, eps, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindLayerNormGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 5, 3));
  TensorView dy = ctx.inputs[0], x = ctx.inputs[1], w = ctx.inputs[2];
  TensorView mean = ctx.inputs[3], rstd = ctx.inputs[4];
  TensorView dx = ctx.outputs[0], dw = ctx.outputs[1], db = ctx.outputs[2];
  int64_t c = layerNormWidth(x, w, mean);
  if (c == 0 || dy.shape != x.shape || dx.shape != x.shape || rstd.shape != mean.shape ||
      dw.shape != w.shape || db.shape != w.shape)
    return invalid(ctx, "shapes do not match input " + str(x.shape));
  int64_t rows = mean.numElements();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::layerNormGrad(dy.f32(), x.f32(), w.f32(), mean.f32(), rstd.f32(), dx.f32(), dw.f32(),
                       db.f32(), rows, c, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindEmbedding(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  TensorView table = ctx.inputs[0], ids = ctx.inputs[1], out = ctx.outputs[0];
  Shape expected = ids.shape;
  if (table.shape.size() != 2) return invalid(ctx, "table must be [vocab, dim]");
  expected.push_back(table.shape[1]);
  if (out.shape != expected) return invalid(ctx, "output " + str(out.shape) + " does not match");
  int64_t vocab = table.shape[0], dim = table.shape[1];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, vocab));
  if (block.second != vocab) {
    // A block of a split table: rows of ids in this block, zeros for the others (the devices'
    // lookups are summed).
    int64_t offset = block.first, total = block.second;
    return BoundStep([=] {
      const int64_t* p = ids.i64();
      float* o = out.f32();
      for (int64_t i = 0, n = ids.numElements(); i < n; ++i) {
        if (p[i] < 0 || p[i] >= total)
          return Status::InvalidInput(where + "a token id is outside [0, " + std::to_string(total) +
                                      ") (the data does not fit the model's vocabulary)");
        const int64_t local = p[i] - offset;
        if (local >= 0 && local < vocab)
          std::copy(table.f32() + local * dim, table.f32() + (local + 1) * dim, o + i * dim);
        else
          std::fill(o + i * dim, o + (i + 1) * dim, 0.0f);
      }
      return Status::Ok();
    });
  }
  return BoundStep([=] {
    if (!cpu::embedding(table.f32(), ids.i64(), out.f32(), ids.numElements(), vocab, dim, *pool))
      return Status::InvalidInput(where + "a token id is outside [0, " + std::to_string(vocab) +
                                  ") (the data does not fit the model's vocabulary)");
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindEmbeddingGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  TensorView dy = ctx.inputs[0], ids = ctx.inputs[1], dtable = ctx.outputs[0];
  Shape expected = ids.shape;
  if (dtable.shape.size() != 2) return invalid(ctx, "gradient must be [vocab, dim]");
  expected.push_back(dtable.shape[1]);
  if (dy.shape != expected) return invalid(ctx, "dy " + str(dy.shape) + " does not match the ids");
  int64_t vocab = dtable.shape[0], dim = dtable.shape[1];
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, vocab));
  if (block.second != vocab) {
    // This device's rows of a split gradient: the ids in its block, in order.
    int64_t offset = block.first, total = block.second;
    return BoundStep([=] {
      const int64_t* p = ids.i64();
      float* g = dtable.f32();
      std::fill(g, g + vocab * dim, 0.0f);
      for (int64_t i = 0, n = ids.numElements(); i < n; ++i) {
        if (p[i] < 0 || p[i] >= total)
          return Status::InvalidInput(where + "a token id is outside [0, " + std::to_string(total) + ")");
        const int64_t local = p[i] - offset;
        if (local < 0 || local >= vocab) continue;
        const float* d = dy.f32() + i * dim;
        for (int64_t c = 0; c < dim; ++c) g[local * dim + c] += d[c];
      }
      return Status::Ok();
    });
  }
  return BoundStep([=] {
    // The forward lookup checked these ids in a compiled plan; a hand-edited plan may not have
    // one, and an id out of range would write outside the gradient.
    const int64_t* p = ids.i64();
    for (int64_t i = 0, n = ids.numElements(); i < n; ++i)
      if (p[i] < 0 || p[i] >= vocab)
        return Status::InvalidInput(where + "a token id is outside [0, " + std::to_string(vocab) + ")");
    cpu::embeddingGrad(dy.f32(), ids.i64(), dtable.f32(), ids.numElements(), vocab, dim, *pool);
    return Status::Ok();
  });
}

}  // namespace

const BinderTable& transformerBinders() {
  static const BinderTable table = {
      {"batch_matmul", bindBatchMatmul},
      {"transpose", bindTranspose},
      {"split", bindSplit},
      {"concat", bindConcat},
      {"causal_softmax", bindCausalSoftmax},
      {"causal_softmax_grad", bindCausalSoftmaxGrad},
      {"causal_attention", bindCausalAttention},
      {"causal_attention_grad", bindCausalAttentionGrad},
      {"layer_norm", bindLayerNorm},
      {"layer_norm_grad", bindLayerNormGrad},
      {"embedding", bindEmbedding},
      {"embedding_grad", bindEmbeddingGrad},
  };
  return table;
}

}  // namespace dtc
