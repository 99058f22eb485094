// Bindings of the transformer ops (batched GEMMs, softmax, embeddings; see
// cpu/kernels/transformer_kernels.h), with the contracts of exec/transformer_contracts.h. The
// layout ops bind in cpu_layout_table.cc, causal attention in cpu_attention_table.cc, the norms
// in cpu_norm_table.cc, and kernels with a file of their own (kernels/swiglu.cc,
// kernels/rotary.cc, kernels/rms_norm.cc) there.
#include <algorithm>
#include <vector>

#include "cpu/cpu_binders.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/transformer_kernels.h"
#include "exec/transformer_contracts.h"

namespace dtc {
namespace {

StatusOr<BoundStep> bindBatchMatmul(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(GemmDims g, checkBatchMatmul(ctx));
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  int64_t batch = c.numElements() / std::max<int64_t>(g.m * g.n, 1);
  float *pa = a.f32(), *pb = b.f32(), *pc = c.f32();
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::batchMatmul(pa, pb, pc, batch, g.m, g.n, g.k, g.transA, g.transB, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalSoftmax(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CausalSoftmaxDims d, checkCausalSoftmax(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalSoftmax(x.f32(), y.f32(), d.batch, d.t, d.scale, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSoftmax(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(SoftmaxDims d, checkSoftmax(ctx));
  TensorView x = ctx.inputs[0], y = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    (d.log ? cpu::logSoftmax : cpu::softmax)(x.f32(), y.f32(), d.rows, d.n, d.scale, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindSoftmaxGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(SoftmaxDims d, checkSoftmaxGrad(ctx));
  TensorView dy = ctx.inputs[0], y = ctx.inputs[1], dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    (d.log ? cpu::logSoftmaxGrad : cpu::softmaxGrad)(dy.f32(), y.f32(), dx.f32(), d.rows, d.n,
                                                     d.scale, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindCausalSoftmaxGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(CausalSoftmaxDims d, checkCausalSoftmaxGrad(ctx));
  TensorView dy = ctx.inputs[0], y = ctx.inputs[1], dx = ctx.outputs[0];
  ThreadPool* pool = &ctx.pool;
  return BoundStep([=] {
    cpu::causalSoftmaxGrad(dy.f32(), y.f32(), dx.f32(), d.batch, d.t, d.scale, *pool);
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindEmbedding(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(EmbeddingDims e, checkEmbedding(ctx));
  TensorView table = ctx.inputs[0], ids = ctx.inputs[1], out = ctx.outputs[0];
  int64_t vocab = e.vocab, dim = e.dim;
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
          return Status::InvalidInput(where + tokenOutsideMessage(total, true));
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
      return Status::InvalidInput(where + tokenOutsideMessage(vocab, true));
    return Status::Ok();
  });
}

StatusOr<BoundStep> bindEmbeddingGrad(const StepContext& ctx) {
  DTC_ASSIGN_OR_RETURN(EmbeddingDims e, checkEmbeddingGrad(ctx));
  TensorView dy = ctx.inputs[0], ids = ctx.inputs[1], dtable = ctx.outputs[0];
  int64_t vocab = e.vocab, dim = e.dim;
  ThreadPool* pool = &ctx.pool;
  std::string where = ctx.where();
  DTC_ASSIGN_OR_RETURN(auto block, vocabularyBlock(ctx, vocab));
  // nn.Embedding's padding_idx: its row's gradient is zero (on the device holding it).
  const int64_t paddingRow =
      ctx.hasAttr("padding_idx") ? ctx.intAttr("padding_idx") - block.first : -1;
  auto clearPadding = [=](float* g) {
    if (paddingRow >= 0 && paddingRow < vocab)
      std::fill(g + paddingRow * dim, g + (paddingRow + 1) * dim, 0.0f);
  };
  if (block.second != vocab) {
    // This device's rows of a split gradient: the ids in its block, in order.
    int64_t offset = block.first, total = block.second;
    return BoundStep([=] {
      const int64_t* p = ids.i64();
      float* g = dtable.f32();
      std::fill(g, g + vocab * dim, 0.0f);
      for (int64_t i = 0, n = ids.numElements(); i < n; ++i) {
        if (p[i] < 0 || p[i] >= total)
          return Status::InvalidInput(where + tokenOutsideMessage(total, false));
        const int64_t local = p[i] - offset;
        if (local < 0 || local >= vocab) continue;
        const float* d = dy.f32() + i * dim;
        for (int64_t c = 0; c < dim; ++c) g[local * dim + c] += d[c];
      }
      clearPadding(g);
      return Status::Ok();
    });
  }
  return BoundStep([=] {
    // The forward lookup checked these ids in a compiled plan; a hand-edited plan may not have
    // one, and an id out of range would write outside the gradient.
    const int64_t* p = ids.i64();
    for (int64_t i = 0, n = ids.numElements(); i < n; ++i)
      if (p[i] < 0 || p[i] >= vocab)
        return Status::InvalidInput(where + tokenOutsideMessage(vocab, false));
    cpu::embeddingGrad(dy.f32(), ids.i64(), dtable.f32(), ids.numElements(), vocab, dim, *pool);
    clearPadding(dtable.f32());
    return Status::Ok();
  });
}

}  // namespace

DTC_CPU_BINDER(batch_matmul, bindBatchMatmul)
DTC_CPU_BINDER(causal_softmax, bindCausalSoftmax)
DTC_CPU_BINDER(causal_softmax_grad, bindCausalSoftmaxGrad)
DTC_CPU_BINDER(softmax, bindSoftmax)
DTC_CPU_BINDER(softmax_grad, bindSoftmaxGrad)
DTC_CPU_BINDER(embedding, bindEmbedding)
DTC_CPU_BINDER(embedding_grad, bindEmbeddingGrad)

}  // namespace dtc
