// The operand contracts of the transformer ops (cpu/cpu_transformer_table.cc: batched GEMMs,
// causal softmax, SwiGLU, rotary, embeddings, attention), shared by the CPU and CUDA kernel tables
// so both backends accept the same steps and refuse the others with the same messages. Each check
// returns what a launch needs; a backend's own limits are checked by its binder after the
// contract.
#pragma once

#include <algorithm>
#include <vector>

#include "exec/bind_util.h"
#include "exec/core_contracts.h"
#include "ops/attention_positions.h"
#include "ops/packed_attention.h"

namespace dtc {

// batch_matmul's shapes: operands of one rank >= 3 with equal batch dimensions, each batch one
// GEMM. The operands' arity and element types are checked first (checkBatchMatmul on the CPU;
// CUDA's contractionTypes also takes 16-bit operands).
inline StatusOr<GemmDims> batchMatmulDims(const StepContext& ctx) {
  const TensorView &a = ctx.inputs[0], &b = ctx.inputs[1], &c = ctx.outputs[0];
  size_t r = a.shape.size();
  if (r < 3 || b.shape.size() != r || c.shape.size() != r ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin()) ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, c.shape.begin()))
    return invalid(ctx, "needs operands of one rank >= 3 with equal batch dimensions");
  return trailingGemm(ctx);
}

inline StatusOr<GemmDims> checkBatchMatmul(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  return batchMatmulDims(ctx);
}

// ---- Causal softmax over [..., T, T] scores: `batch` square blocks of T.

struct CausalSoftmaxDims {
  int64_t batch = 0, t = 0;
  float scale = 0;
};

// [..., T, T] scores: the dimensions, or an error if the shape is not square in its last two.
inline StatusOr<CausalSoftmaxDims> squareScores(const StepContext& ctx, const TensorView& x) {
  size_t r = x.shape.size();
  if (r < 2 || x.shape[r - 1] != x.shape[r - 2] || x.shape[r - 1] == 0)
    return invalid(ctx, "needs [..., T, T] scores, got " + str(x.shape));
  CausalSoftmaxDims d;
  d.t = x.shape[r - 1];
  d.batch = x.numElements() / (d.t * d.t);
  d.scale = static_cast<float>(ctx.floatAttr("scale"));
  return d;
}

// A softmax's forward x -> y, its dimensions read from x by `dims`.
template <typename Dims>
inline StatusOr<Dims> checkSoftmaxForward(const StepContext& ctx,
                                          StatusOr<Dims> (*dims)(const StepContext&,
                                                                 const TensorView&)) {
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  return dims(ctx, ctx.inputs[0]);
}

// A softmax's gradient (dy, y) -> dx, its dimensions read from y by `dims`.
template <typename Dims>
inline StatusOr<Dims> checkSoftmaxBackward(const StepContext& ctx,
                                           StatusOr<Dims> (*dims)(const StepContext&,
                                                                  const TensorView&)) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.inputs[1]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[0], ctx.outputs[0]));
  return dims(ctx, ctx.inputs[1]);
}

// causal_softmax: x -> y; causal_softmax_grad: (dy, y) -> dx.
inline StatusOr<CausalSoftmaxDims> checkCausalSoftmax(const StepContext& ctx) {
  return checkSoftmaxForward(ctx, squareScores);
}
inline StatusOr<CausalSoftmaxDims> checkCausalSoftmaxGrad(const StepContext& ctx) {
  return checkSoftmaxBackward(ctx, squareScores);
}

// ---- Softmax over the last dimension of x [rows..., N]: `rows` rows of N.

struct SoftmaxDims {
  int64_t rows = 0, n = 0;
  float scale = 0;
  bool log = false;  // log_softmax
};

inline StatusOr<SoftmaxDims> softmaxRows(const StepContext& ctx, const TensorView& x) {
  if (x.shape.empty() || x.shape.back() == 0)
    return invalid(ctx, "needs [..., N] with N > 0, got " + str(x.shape));
  SoftmaxDims d;
  d.n = x.shape.back();
  d.rows = x.numElements() / d.n;
  d.scale = static_cast<float>(ctx.floatAttr("scale"));
  d.log = ctx.intAttr("log") != 0;
  return d;
}

// softmax: x -> y; softmax_grad: (dy, y) -> dx.
inline StatusOr<SoftmaxDims> checkSoftmax(const StepContext& ctx) {
  return checkSoftmaxForward(ctx, softmaxRows);
}
inline StatusOr<SoftmaxDims> checkSoftmaxGrad(const StepContext& ctx) {
  return checkSoftmaxBackward(ctx, softmaxRows);
}

// ---- Llama-family blocks: SwiGLU's gate and rotary embeddings (RMSNorm's contracts are in
// exec/norm_contracts.h).

// swiglu: (gate, up) -> y = silu(gate)·up; swiglu_grad: (dy, gate, up) -> (dgate, dup). Every
// operand float32, of one shape; returns the element count.
inline StatusOr<int64_t> checkSwiglu(const StepContext& ctx) {
  const bool grad = ctx.inputs.size() == 3;
  DTC_RETURN_IF_ERROR(expect(ctx, grad ? 3 : 2, grad ? 2 : 1));
  for (const auto* list : {&ctx.inputs, &ctx.outputs})
    for (const TensorView& t : *list)
      if (t.shape != ctx.inputs[0].shape)
        return invalid(ctx, "operands must share one shape, got " + str(ctx.inputs[0].shape) +
                                " and " + str(t.shape));
  return ctx.inputs[0].numElements();
}

struct RotaryDims {
  int64_t n = 0, t = 0, d = 0;  // elements of x; the tables' [T, D]
  int64_t heads = 1;            // consecutive rows of D at one position (seq_major: H)
};

// rotary: (x, cos, sin) -> y; rotary_grad: (dy, cos, sin) -> dx. x [..., T, D] with D even,
// or with `seq_major` [..., T, H, D] (each of a position's heads rotated alike), cos and sin
// [T, D] (leading dimensions of size 1 allowed); float32.
inline StatusOr<RotaryDims> checkRotary(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 1));
  const TensorView &x = ctx.inputs[0], &cos = ctx.inputs[1], &sin = ctx.inputs[2];
  const Shape& s = x.shape;
  const bool seqMajor = ctx.intAttr("seq_major") != 0;
  const size_t rank = seqMajor ? 3 : 2;  // of [T, (H,) D]
  auto table = [&](const Shape& t) {
    if (s.size() < rank || t.size() < 2 || t.size() > s.size()) return false;
    for (size_t i = 0; i + 2 < t.size(); ++i)
      if (t[i] != 1) return false;
    return t[t.size() - 2] == s[s.size() - rank] && t.back() == s.back();
  };
  if (s.size() < rank || s.back() % 2 != 0 || !table(cos.shape) || sin.shape != cos.shape ||
      ctx.outputs[0].shape != s)
    return invalid(ctx, std::string("expects x [..., T, ") + (seqMajor ? "H, " : "") +
                            "D] (D even) with cos and sin [T, D], got " + str(s) + ", " +
                            str(cos.shape) + " and " + str(sin.shape));
  return RotaryDims{x.numElements(), s[s.size() - rank], s.back(), seqMajor ? s[s.size() - 2] : 1};
}

// ---- Embeddings: a table [vocab, dim] looked up by int64 ids [...]. These check the shapes;
// the binders then place the table's block (vocabularyBlock: the step's `vocab_axes`).

struct EmbeddingDims {
  int64_t vocab = 0, dim = 0;
};

// embedding: (table, ids) -> out [..., dim].
inline StatusOr<EmbeddingDims> checkEmbedding(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  const TensorView &table = ctx.inputs[0], &ids = ctx.inputs[1], &out = ctx.outputs[0];
  Shape expected = ids.shape;
  if (table.shape.size() != 2) return invalid(ctx, "table must be [vocab, dim]");
  expected.push_back(table.shape[1]);
  if (out.shape != expected) return invalid(ctx, "output " + str(out.shape) + " does not match");
  return EmbeddingDims{table.shape[0], table.shape[1]};
}

// embedding_grad: (dy, ids) -> dtable [vocab, dim].
inline StatusOr<EmbeddingDims> checkEmbeddingGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 2, 1, {1}));
  const TensorView &dy = ctx.inputs[0], &ids = ctx.inputs[1], &dtable = ctx.outputs[0];
  Shape expected = ids.shape;
  if (dtable.shape.size() != 2) return invalid(ctx, "gradient must be [vocab, dim]");
  expected.push_back(dtable.shape[1]);
  if (dy.shape != expected) return invalid(ctx, "dy " + str(dy.shape) + " does not match the ids");
  return EmbeddingDims{dtable.shape[0], dtable.shape[1]};
}

// causal_attention (q, k, v) -> (out, lse) and causal_attention_grad (dout, q, k, v, out, lse)
// -> (dq, dk, dv): q (dout, out, dq) [..., Tq, D], k and v (dk, dv) [..., Tk, D] with the same
// leading dimensions, lse [..., Tq]. Tq = Tk unless the queries are this device's block of the
// sequence, split over the mesh axes `seq_axes` (context parallelism). The keys are then the whole
// sequence (Tk = Tq times the devices), or a block as long as the queries' (a ring's step): that
// of the device `kv_shift` places back along the axes. `seq_chunks` > 0: the sequence is laid out
// load-balanced in that many chunks (ops/attention_positions.h). k and v may have fewer heads
// (the dimension before T; grouped-query attention): each serves `group` consecutive query
// heads, so query slice s reads key/value slice s / group. Returns (slices, Tq, D, Tk, group)
// and where the blocks sit.
struct AttentionDims {
  int64_t slices = 0, t = 0, d = 0, tk = 0;
  AttentionPositions positions;
  int64_t group = 1;
};

inline AttentionDims attentionDims(const TensorView& q) {
  if (q.shape.size() < 2) return {};
  const int64_t t = q.shape[q.shape.size() - 2], d = q.shape.back();
  if (t == 0 || d == 0) return {};
  return {q.numElements() / (t * d), t, d, t, {}};
}

// The keys' operand `k` against the queries' `q`, and the blocks' places from the step's
// attributes.
inline StatusOr<AttentionDims> attentionBlocks(const StepContext& ctx, const TensorView& q,
                                               const TensorView& k, const TensorView& lse) {
  AttentionDims a = attentionDims(q);
  const size_t rank = q.shape.size();
  bool sameLead = rank == k.shape.size() && rank >= 2 && k.shape.back() == q.shape.back();
  if (sameLead && rank >= 3) {  // heads: k's divide q's
    const int64_t heads = q.shape[rank - 3], kvHeads = k.shape[rank - 3];
    sameLead = std::equal(q.shape.begin(), q.shape.end() - 3, k.shape.begin()) && kvHeads > 0 &&
               heads % kvHeads == 0;
    if (sameLead) a.group = heads / kvHeads;
  }
  if (a.slices == 0 || !sameLead || k.shape[k.shape.size() - 2] == 0 ||
      lse.numElements() != a.slices * a.t)
    return invalid(ctx,
                   "needs q [..., H, T, D], k and v [..., Hk, Tk, D] (Hk dividing H) and lse "
                   "[..., T], got q " +
                       str(q.shape) + ", k " + str(k.shape) + " and lse " + str(lse.shape));
  a.tk = k.shape[k.shape.size() - 2];
  int64_t devices = 1, index = 0;
  if (!ctx.intsAttr("seq_axes").empty()) {
    if (!ctx.mesh) return invalid(ctx, "splits its queries in a plan run without a device mesh");
    DTC_ASSIGN_OR_RETURN(std::vector<int> axes, meshAxesAttr(ctx, "seq_axes"));
    devices = ctx.mesh->groupSize(axes);
    index = ctx.mesh->indexIn(axes);
    a.positions.qFirst = index * a.t;
  }
  const int64_t shift = ctx.intAttr("kv_shift");
  if (shift < 0 || (shift > 0 && devices == 1) || shift >= std::max<int64_t>(devices, 1))
    return invalid(ctx, "needs kv_shift in [0, " + std::to_string(devices) + "), got " +
                            std::to_string(shift));
  if (a.tk == a.t && devices > 1) {
    a.positions.kFirst = (index - shift + devices) % devices * a.t;
  } else if (a.tk != a.t * devices || shift != 0) {
    return invalid(ctx, "holds " + std::to_string(a.t) + " queries of " +
                            std::to_string(a.t * devices) + " against " + std::to_string(a.tk) +
                            " keys; the keys must be the whole sequence or a block as long");
  }
  a.positions.length = a.t * devices;
  const int64_t chunks = ctx.intAttr("seq_chunks");
  if (chunks < 0 || chunks % 2 != 0 || (chunks > 0 && a.positions.length % chunks != 0))
    return invalid(ctx, "needs seq_chunks an even number dividing the sequence of " +
                            std::to_string(a.positions.length) + ", got " + std::to_string(chunks));
  a.positions.chunks = chunks;
  return a;
}

inline StatusOr<AttentionDims> checkCausalAttention(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 3, 2));
  const TensorView &q = ctx.inputs[0], &lse = ctx.outputs[1];
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, ctx.outputs[0]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.inputs[2]));
  return attentionBlocks(ctx, q, ctx.inputs[1], lse);
}

inline StatusOr<AttentionDims> checkCausalAttentionGrad(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 6, 3));
  const TensorView& q = ctx.inputs[1];
  for (size_t i : {0, 4}) DTC_RETURN_IF_ERROR(sameShape(ctx, q, ctx.inputs[i]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, q, ctx.outputs[0]));
  const TensorView& k = ctx.inputs[2];
  for (const TensorView* t : {&ctx.inputs[3], &ctx.outputs[1], &ctx.outputs[2]})
    DTC_RETURN_IF_ERROR(sameShape(ctx, k, *t));
  return attentionBlocks(ctx, q, k, ctx.inputs[5]);
}

// attention_merge (out_a, lse_a, out_b, lse_b) -> (out, lse): attention of the same queries over
// two sets of keys, each normalised by its own log-sum-exp, merged into attention over both:
// out [..., T, D] and lse [..., T] of any float types alike. A query that sees no key of a set
// has lse −inf there (and out 0). Returns (rows, D).
struct AttentionMergeDims {
  int64_t rows = 0, d = 0;
};

inline StatusOr<AttentionMergeDims> checkAttentionMerge(const StepContext& ctx) {
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 2));
  const TensorView &out = ctx.outputs[0], &lse = ctx.outputs[1];
  for (const TensorView* o : {&ctx.inputs[0], &ctx.inputs[2]})
    if (o->shape != out.shape)
      return invalid(ctx, "output " + str(o->shape) + " differs from " + str(out.shape));
  for (const TensorView* l : {&ctx.inputs[1], &ctx.inputs[3]})
    if (l->shape != lse.shape)
      return invalid(ctx, "log-sum-exp " + str(l->shape) + " differs from " + str(lse.shape));
  if (out.shape.size() < 2 || out.shape.back() <= 0 ||
      lse.numElements() * out.shape.back() != out.numElements())
    return invalid(ctx, "needs out [..., T, D] and lse [..., T], got " + str(out.shape) + " and " +
                            str(lse.shape));
  return AttentionMergeDims{lse.numElements(), out.shape.back()};
}

// causal_attention_qkv (qkv) -> (out, lse) and causal_attention_qkv_grad (dout, qkv, out, lse)
// -> dqkv: attention on the fused projection qkv [B, T, 3·H·D] (ops/packed_attention.h), `heads`
// = H. Or on three projections: causal_attention_qkv (q, k, v) -> (out, lse) and
// causal_attention_qkv_grad (dout, q, k, v, out, lse) -> (dq, dk, dv), q [B, T, H·D], k and v
// [B, T, Hk·D] with Hk dividing H. out and dout [B, T, H·D], lse [B, H, T]. Returns
// (B, T, H, D, Hk).
inline StatusOr<PackedAttentionDims> packedAttentionDims(const StepContext& ctx,
                                                         const TensorView& q, const TensorView* k,
                                                         const TensorView& out,
                                                         const TensorView& lse) {
  const int64_t heads = ctx.intAttr("heads");
  if (heads <= 0) return invalid(ctx, "needs heads > 0, got " + std::to_string(heads));
  const Shape& s = q.shape;
  const int64_t parts = k ? 1 : 3;
  if (s.size() != 3 || s[0] <= 0 || s[1] <= 0 || s[2] <= 0 || s[2] % (parts * heads) != 0)
    return invalid(ctx, std::string(k ? "needs q [B, T, heads·D]" : "needs qkv [B, T, 3·heads·D]") +
                            ", got " + str(s) + " with " + std::to_string(heads) + " heads");
  PackedAttentionDims a{s[0], s[1], heads, s[2] / (parts * heads), heads};
  if (k) {
    const Shape& ks = k->shape;
    const bool grouped = ks.size() == 3 && ks[0] == a.batch && ks[1] == a.t && ks[2] > 0 &&
                         ks[2] % a.d == 0 && heads % (ks[2] / a.d) == 0;
    if (!grouped)
      return invalid(ctx, "needs k and v [B, T, Hk·D] with Hk dividing " + std::to_string(heads) +
                              " heads for q " + str(s) + ", got " + str(ks));
    a.kvHeads = ks[2] / a.d;
  }
  if (out.shape != Shape{a.batch, a.t, heads * a.d} || lse.shape != Shape{a.batch, heads, a.t})
    return invalid(ctx, "needs out [B, T, heads·D] and lse [B, heads, T] for q " + str(s) +
                            ", got " + str(out.shape) + " and " + str(lse.shape));
  return a;
}

inline StatusOr<PackedAttentionDims> checkCausalAttentionQkv(const StepContext& ctx) {
  if (ctx.inputs.size() == 3) {
    DTC_RETURN_IF_ERROR(expect(ctx, 3, 2));
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.inputs[2]));
    return packedAttentionDims(ctx, ctx.inputs[0], &ctx.inputs[1], ctx.outputs[0], ctx.outputs[1]);
  }
  DTC_RETURN_IF_ERROR(expect(ctx, 1, 2));
  return packedAttentionDims(ctx, ctx.inputs[0], nullptr, ctx.outputs[0], ctx.outputs[1]);
}

inline StatusOr<PackedAttentionDims> checkCausalAttentionQkvGrad(const StepContext& ctx) {
  if (ctx.inputs.size() == 6) {
    DTC_RETURN_IF_ERROR(expect(ctx, 6, 3));
    DTC_ASSIGN_OR_RETURN(
        PackedAttentionDims a,
        packedAttentionDims(ctx, ctx.inputs[1], &ctx.inputs[2], ctx.inputs[4], ctx.inputs[5]));
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[4], ctx.inputs[0]));
    DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
    for (const TensorView* t : {&ctx.inputs[3], &ctx.outputs[1], &ctx.outputs[2]})
      DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[2], *t));
    return a;
  }
  DTC_RETURN_IF_ERROR(expect(ctx, 4, 1));
  DTC_ASSIGN_OR_RETURN(PackedAttentionDims a, packedAttentionDims(ctx, ctx.inputs[1], nullptr,
                                                                  ctx.inputs[2], ctx.inputs[3]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[2], ctx.inputs[0]));
  DTC_RETURN_IF_ERROR(sameShape(ctx, ctx.inputs[1], ctx.outputs[0]));
  return a;
}

// The message of a token id outside [0, total); `vocabulary` adds the forward lookup's hint.
inline std::string tokenOutsideMessage(int64_t total, bool vocabulary) {
  return "a token id is outside [0, " + std::to_string(total) + ")" +
         (vocabulary ? " (the data does not fit the model's vocabulary)" : "");
}

}  // namespace dtc
