#include "sharding/ShardingRules.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/BuiltinTypes.h"

#include "dist/IR/DistOps.h"
#include "graph/IR/GraphOps.h"

using namespace mlir;

namespace dtc::sharding {
namespace {

int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }
ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }

class RuleBuilder {
 public:
  explicit RuleBuilder(Operation* op) {
    rule_.operands.resize(op->getNumOperands());
    rule_.results.resize(op->getNumResults());
    rule_.operandMult.resize(op->getNumOperands());
    rule_.resultMult.resize(op->getNumResults());
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      rule_.operands[i].assign(rankOf(v), -1);
      rule_.operandMult[i].assign(rankOf(v), 1);
    }
    for (auto [i, v] : llvm::enumerate(op->getResults())) {
      rule_.results[i].assign(rankOf(v), -1);
      rule_.resultMult[i].assign(rankOf(v), 1);
    }
  }
  RuleBuilder& operandMult(unsigned i, int64_t dim, int64_t m) {
    rule_.operandMult[i][dim] = m;
    return *this;
  }
  RuleBuilder& resultMult(unsigned i, int64_t dim, int64_t m) {
    rule_.resultMult[i][dim] = m;
    return *this;
  }
  // Result i is the maximum over factor f (which it lacks), not a sum.
  RuleBuilder& maximised(unsigned i, int f) {
    maxed_.push_back({i, f});
    return *this;
  }
  RuleBuilder& plainOnly(int f) {
    plain_.push_back(f);
    return *this;
  }
  int factor() { return rule_.numFactors++; }
  SmallVector<int> factors(int n) {
    SmallVector<int> f;
    for (int i = 0; i < n; ++i) f.push_back(factor());
    return f;
  }
  RuleBuilder& operand(unsigned i, int64_t dim, int f) { return set(rule_.operands[i], dim, f); }
  RuleBuilder& result(unsigned i, int64_t dim, int f) { return set(rule_.results[i], dim, f); }
  // Dimensions [0, fs.size()) of operand/result i get factors fs.
  RuleBuilder& operandDims(unsigned i, ArrayRef<int> fs) {
    for (auto [d, f] : llvm::enumerate(fs)) operand(i, d, f);
    return *this;
  }
  RuleBuilder& resultDims(unsigned i, ArrayRef<int> fs) {
    for (auto [d, f] : llvm::enumerate(fs)) result(i, d, f);
    return *this;
  }
  // Result i does not depend on factor f (which it lacks): not a sum over it.
  RuleBuilder& independent(unsigned i, int f) {
    independent_.push_back({i, f});
    return *this;
  }
  // By default a result sums over every operand factor it lacks.
  OpShardingRule take() {
    rule_.plainOnly.assign(rule_.numFactors, false);
    for (int f : plain_) rule_.plainOnly[f] = true;
    rule_.summed.assign(rule_.results.size(), {});
    rule_.maxed.assign(rule_.results.size(), {});
    for (unsigned i = 0; i < rule_.results.size(); ++i)
      for (int f = 0; f < rule_.numFactors; ++f) {
        bool inOperands = false;
        for (const auto& dims : rule_.operands) inOperands |= llvm::is_contained(dims, f);
        if (!inOperands || llvm::is_contained(rule_.results[i], f) ||
            llvm::is_contained(independent_, std::make_pair(i, f)))
          continue;
        (llvm::is_contained(maxed_, std::make_pair(i, f)) ? rule_.maxed : rule_.summed)[i]
            .push_back(f);
      }
    return std::move(rule_);
  }

 private:
  RuleBuilder& set(SmallVector<int>& dims, int64_t dim, int f) {
    if (dim >= 0 && dim < (int64_t)dims.size()) dims[dim] = f;
    return *this;
  }
  OpShardingRule rule_;
  SmallVector<std::pair<unsigned, int>> independent_, maxed_;
  SmallVector<int> plain_;
};

// Every operand and result has the same shape (rank-0 operands, such as AdamW's step, excepted):
// one factor per dimension.
OpShardingRule elementwise(Operation* op) {
  RuleBuilder b(op);
  int64_t rank = rankOf(op->getResult(0));
  SmallVector<int> fs = b.factors(rank);
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (rankOf(op->getOperand(i)) == rank) b.operandDims(i, fs);
  for (unsigned i = 0; i < op->getNumResults(); ++i) b.resultDims(i, fs);
  return b.take();
}

// NumPy broadcasting: a result dimension's factor reaches the right-aligned operand dimensions
// that are not broadcast (size 1 against a larger result).
OpShardingRule broadcasting(Operation* op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  SmallVector<int> fs = b.factors(out.size());
  b.resultDims(0, fs);
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    ArrayRef<int64_t> in = shapeOf(op->getOperand(i));
    size_t lead = out.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] == out[lead + d]) b.operand(i, d, fs[lead + d]);
  }
  return b.take();
}

// Losses: every operand dimension is summed into the scalar, except the class dimension of
// cross-entropy (the softmax needs whole rows).
// Class weights (`weight`, [C]) stay whole; a per-row loss's result has the rows' factors.
OpShardingRule loss(Operation* op, unsigned first, bool classDim, bool isGrad,
                    Value weight = Value(), bool perRow = false) {
  RuleBuilder b(op);
  int64_t rank = rankOf(op->getOperand(first));
  SmallVector<int> fs = b.factors(rank);
  if (classDim) fs.back() = -1;
  for (unsigned i = first; i < op->getNumOperands(); ++i)
    if (op->getOperand(i) != weight)
      b.operandDims(i, ArrayRef<int>(fs).take_front(rankOf(op->getOperand(i))));
  if (isGrad) b.resultDims(0, fs);
  if (perRow && !isGrad) b.resultDims(0, ArrayRef<int>(fs).take_front(rank - 1));
  return b.take();
}

// The factors of logits [..., V]: the rows' and the class's.
SmallVector<int> withClass(ArrayRef<int> rows, int classes) {
  SmallVector<int> dims(rows);
  dims.push_back(classes);
  return dims;
}

OpShardingRule matmul(Operation* op, bool tA, bool tB, int64_t batchDims) {
  RuleBuilder b(op);
  SmallVector<int> batch = b.factors(batchDims);
  int m = b.factor(), n = b.factor(), k = b.factor();
  b.operandDims(0, batch).operandDims(1, batch).resultDims(0, batch);
  b.operand(0, batchDims + (tA ? 1 : 0), m).operand(0, batchDims + (tA ? 0 : 1), k);
  b.operand(1, batchDims + (tB ? 1 : 0), k).operand(1, batchDims + (tB ? 0 : 1), n);
  b.result(0, batchDims, m).result(0, batchDims + 1, n);
  return b.take();
}

// Reshape: dimensions are grouped into runs of equal element count; the major dimension of a
// group carries its factor to the group's major dimension on the other side (sharding it cuts
// the same contiguous blocks). Other dimensions of a merged or split group stay whole.
OpShardingRule reshape(Operation* op) {
  RuleBuilder b(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0)), out = shapeOf(op->getResult(0));
  size_t i = 0, o = 0;
  while (i < in.size() && o < out.size()) {
    // Size-1 dimensions carry nothing.
    if (in[i] == 1) {
      ++i;
      continue;
    }
    if (out[o] == 1) {
      ++o;
      continue;
    }
    size_t i0 = i, o0 = o;
    int64_t a = in[i++], c = out[o++];
    while (a != c) {
      if (a < c && i < in.size())
        a *= in[i++];
      else if (c < a && o < out.size())
        c *= out[o++];
      else
        break;
    }
    if (a != c) break;
    int f = b.factor();
    b.operand(0, i0, f).result(0, o0, f);
    if (i - i0 != 1 || o - o0 != 1) b.plainOnly(f);  // chunks do not survive a merge or split
  }
  return b.take();
}

OpShardingRule transpose(graph::TransposeOp op) {
  RuleBuilder b(op);
  SmallVector<int> fs = b.factors(rankOf(op.getX()));
  b.operandDims(0, fs);
  for (auto [d, p] : llvm::enumerate(op.getPerm())) b.result(0, d, fs[p]);
  return b.take();
}

// Split into / concatenation of `parts` pieces along `axis`: the same factors everywhere; the
// whole tensor's `axis` holds the pieces' index space `parts` times, so a piece cut over some
// axes is a chunk of the whole cut alike (`parts` x {tp}: a fused q/k/v split by heads).
OpShardingRule splitOrConcat(Operation* op, int64_t axis, int64_t parts, bool isSplit) {
  RuleBuilder b(op);
  SmallVector<int> fs = b.factors(rankOf(op->getResult(0)));
  for (unsigned i = 0; i < op->getNumOperands(); ++i) b.operandDims(i, fs);
  for (unsigned i = 0; i < op->getNumResults(); ++i) b.resultDims(i, fs);
  if (isSplit)
    b.operandMult(0, axis, parts);
  else
    b.resultMult(0, axis, parts);
  return b.take();
}

// Split or concat of pieces of different lengths: the other dimensions are shared, the axis
// stays whole (a block of it would hold parts of different pieces on different devices).
OpShardingRule unevenPieces(Operation* op, int64_t axis) {
  RuleBuilder b(op);
  const int64_t rank = rankOf(op->getResult(0));
  for (int64_t d = 0; d < rank; ++d) {
    if (d == axis) continue;
    const int f = b.factor();
    for (unsigned i = 0; i < op->getNumOperands(); ++i) b.operand(i, d, f);
    for (unsigned i = 0; i < op->getNumResults(); ++i) b.result(i, d, f);
  }
  return b.take();
}

// Ops that need the last `whole` dimensions of their main operands whole (row statistics):
// leading dimensions are shared by every operand and result of at least that rank.
OpShardingRule leading(Operation* op, int64_t rank, int64_t whole) {
  RuleBuilder b(op);
  SmallVector<int> fs = b.factors(rank - whole);
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (rankOf(op->getOperand(i)) >= rank - whole) b.operandDims(i, fs);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    if (rankOf(op->getResult(i)) >= rank - whole) b.resultDims(i, fs);
  return b.take();
}

// NCHW ops whose batch and spatial dimensions must stay whole (batch statistics); channels
// (dimension 1 of 4-D values, dimension 0 of per-channel vectors) share one factor.
OpShardingRule perChannel(Operation* op) {
  RuleBuilder b(op);
  int c = b.factor();
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    b.operand(i, rankOf(op->getOperand(i)) == 4 ? 1 : 0, c);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    b.result(i, rankOf(op->getResult(i)) == 4 ? 1 : 0, c);
  return b.take();
}

// Synchronised BatchNorm pieces: every dimension of NCHW values is a factor, per-channel vectors
// share the channel factor; sums over N, H, W are partial when those are split.
OpShardingRule nchwWithChannels(Operation* op) {
  RuleBuilder b(op);
  SmallVector<int> fs = b.factors(4);
  auto dims = [&](Value v) -> SmallVector<int> {
    return rankOf(v) == 4 ? fs : SmallVector<int>{fs[1]};
  };
  for (unsigned i = 0; i < op->getNumOperands(); ++i) b.operandDims(i, dims(op->getOperand(i)));
  for (unsigned i = 0; i < op->getNumResults(); ++i) b.resultDims(i, dims(op->getResult(i)));
  // batch_norm_normalize's statistics come from the (whole-batch) sums, not from x.
  if (isa<graph::BatchNormNormalizeOp>(op))
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      for (int d : {0, 2, 3}) b.independent(i, fs[d]);
  return b.take();
}

// The token-moving ops of a mixture of experts: tokens [G, S, D] (expert, slot and weight
// [G, S, K]) against the experts' buffer [E, G, C, D]. Groups and the width split freely; E and
// C stay whole (each expert's slots are filled from every token of its group), S and K too.
OpShardingRule moeTokens(Operation* o) {
  RuleBuilder b(o);
  int g = b.factor(), d = b.factor();
  // What each value is: a buffer, tokens, or per-choice (indices and weights: groups only).
  enum Kind { kBuffer, kTokens, kChoices };
  auto kindOf = [&](Value v) {
    if (rankOf(v) == 4) return kBuffer;
    if (isa<IntegerType>(cast<RankedTensorType>(v.getType()).getElementType())) return kChoices;
    if (auto combine = dyn_cast<graph::MoeCombineOp>(o); combine && v == combine.getWeight())
      return kChoices;
    if (auto grad = dyn_cast<graph::MoeCombineGradOp>(o);
        grad && (v == grad.getWeight() || v == grad.getDweight()))
      return kChoices;
    return kTokens;
  };
  auto dims = [&](Value v) -> SmallVector<int> {
    switch (kindOf(v)) {
      case kBuffer: return {-1, g, -1, d};
      case kTokens: return {g, -1, d};
      case kChoices: return {g, -1, -1};
    }
    return {};
  };
  for (auto [i, v] : llvm::enumerate(o->getOperands())) b.operandDims(i, dims(v));
  for (auto [i, v] : llvm::enumerate(o->getResults())) b.resultDims(i, dims(v));
  return b.take();
}

}  // namespace

FailureOr<OpShardingRule> getShardingRule(Operation* op) {
  using namespace graph;
  // Element-wise ops (the graph dialect's unary ops and activation gradients): every dimension
  // passes through.
  if (op->hasTrait<OpTrait::Elementwise>()) return elementwise(op);
  std::optional<OpShardingRule> rule =
      llvm::TypeSwitch<Operation*, std::optional<OpShardingRule>>(op)
          .Case<GeluOp, GeluGradOp, SwigluOp, SwigluGradOp, SgdUpdateOp, AdamwUpdateOp, CastOp,
                dist::ReshardOp>([](Operation* o) { return elementwise(o); })
          .Case<AddOp, SubOp, MulOp, DivOp, BroadcastOp, SelectOp>(
              [](Operation* o) { return broadcasting(o); })
          .Case<NonfiniteCountOp>([](NonfiniteCountOp o) {
            // A count over shards is the sum of the shards' counts.
            RuleBuilder b(o);
            b.operandDims(0, b.factors(rankOf(o.getX())));
            return b.take();
          })
          .Case<LossScaleStepOp>([](LossScaleStepOp o) { return RuleBuilder(o).take(); })
          .Case<FillOp>([](FillOp o) {
            RuleBuilder b(o);
            b.resultDims(0, b.factors(rankOf(o.getResult())));
            return b.take();
          })
          .Case<ReduceSumOp>([](ReduceSumOp o) {
            RuleBuilder b(o);
            SmallVector<int> fs = b.factors(rankOf(o.getX()));
            b.operandDims(0, fs);
            ArrayRef<int64_t> axes = o.getAxes();
            for (int64_t d = 0, r = 0; d < (int64_t)fs.size(); ++d) {
              bool reduced = llvm::is_contained(axes, d);
              if (!reduced) b.result(0, r, fs[d]);
              if (!reduced || o.getKeepdims()) ++r;
            }
            return b.take();
          })
          .Case<ReshapeOp>([](ReshapeOp o) { return reshape(o); })
          .Case<MatmulOp>(
              [](MatmulOp o) { return matmul(o, o.getTransposeLhs(), o.getTransposeRhs(), 0); })
          .Case<LinearOp, LinearGradInputOp, LinearGradWeightOp>([](Operation* o) {
            // Leading dimensions, out features N, in features K. linear: x[.., K] w[N, K] ->
            // [.., N]; grad_input: dy[.., N] w -> [.., K] (sums N); grad_weight: dy[.., N]
            // x[.., K] -> [N, K] (sums the leading dimensions).
            RuleBuilder b(o);
            int64_t lead = rankOf(o->getOperand(0)) - 1;
            SmallVector<int> ls = b.factors(lead);
            int n = b.factor(), k = b.factor();
            auto with = [&](int last) {
              SmallVector<int> dims(ls);
              dims.push_back(last);
              return dims;
            };
            if (isa<LinearOp>(o))
              b.operandDims(0, with(k)).operandDims(1, {n, k}).resultDims(0, with(n));
            else if (isa<LinearGradInputOp>(o))
              b.operandDims(0, with(n)).operandDims(1, {n, k}).resultDims(0, with(k));
            else
              b.operandDims(0, with(n)).operandDims(1, with(k)).resultDims(0, {n, k});
            return b.take();
          })
          .Case<BatchMatmulOp>([](BatchMatmulOp o) {
            return matmul(o, o.getTransposeLhs(), o.getTransposeRhs(), rankOf(o.getLhs()) - 2);
          })
          .Case<SoftmaxCrossEntropyOp>([](Operation* o) { return loss(o, 0, true, false); })
          .Case<NllLossOp>(
              [](NllLossOp o) { return loss(o, 0, true, false, o.getWeight(), o.getPerRow()); })
          .Case<NllLossGradOp>([](NllLossGradOp o) {
            // A per-row gradient's dloss has the rows' factor.
            RuleBuilder b(o);
            SmallVector<int> fs = b.factors(2);
            fs.back() = -1;
            b.operandDims(0, o.getPerRow() ? ArrayRef<int>(fs).take_front(1) : ArrayRef<int>{})
                .operandDims(1, fs)
                .operandDims(2, ArrayRef<int>(fs).take_front(1))
                .resultDims(0, fs);
            return b.take();
          })
          .Case<SoftmaxCrossEntropyGradOp>([](Operation* o) { return loss(o, 1, true, true); })
          .Case<MseOp>([](Operation* o) { return loss(o, 0, false, false); })
          .Case<LabelFractionOp>(
              [](LabelFractionOp o) { return loss(o, 0, false, false, o.getWeight()); })
          .Case<MseGradOp>([](Operation* o) { return loss(o, 1, false, true); })
          .Case<TransposeOp>([](TransposeOp o) { return transpose(o); })
          .Case<SplitOp>([](SplitOp o) {
            if (o.getSizes()) return unevenPieces(o, o.getAxis());
            return splitOrConcat(o, o.getAxis(), o.getParts(), /*isSplit=*/true);
          })
          .Case<ConcatOp>([](ConcatOp o) {
            for (Value piece : o.getPieces())
              if (piece.getType() != o.getPieces().front().getType())
                return unevenPieces(o, o.getAxis());
            return splitOrConcat(o, o.getAxis(), o.getPieces().size(), /*isSplit=*/false);
          })
          .Case<CausalSoftmaxOp, CausalSoftmaxGradOp>(
              [](Operation* o) { return leading(o, rankOf(o->getResult(0)), 2); })
          .Case<SoftmaxOp, SoftmaxGradOp>(
              [](Operation* o) { return leading(o, rankOf(o->getResult(0)), 1); })
          .Case<CausalAttentionOp>([](CausalAttentionOp o) {
            // Batch and heads split freely, and so do the queries (context parallelism: the
            // kernel places its block of them by `seq_axes`); a query needs every key, so k
            // and v stay whole along T, and D everywhere.
            RuleBuilder b(o);
            const int64_t rank = rankOf(o.getQ());
            SmallVector<int> lead = b.factors(rank - 2);
            const int queries = b.factor();
            for (unsigned i = 0; i < 3; ++i) b.operandDims(i, lead);
            b.operand(0, rank - 2, queries);
            b.resultDims(0, lead).resultDims(1, lead);
            b.result(0, rank - 2, queries).result(1, rank - 2, queries);
            return b.take();
          })
          .Case<CausalAttentionGradOp>([](CausalAttentionGradOp o) {
            // As the forward; dk and dv sum over the queries, so they are partial where the
            // queries are split.
            RuleBuilder b(o);
            const int64_t rank = rankOf(o.getQ());
            SmallVector<int> lead = b.factors(rank - 2);
            const int queries = b.factor();
            for (unsigned i = 0; i < 6; ++i) b.operandDims(i, lead);
            for (unsigned i : {0u, 1u, 4u, 5u}) b.operand(i, rank - 2, queries);
            for (unsigned i = 0; i < 3; ++i) b.resultDims(i, lead);
            b.result(0, rank - 2, queries);
            return b.take();
          })
          .Case<LayerNormOp>([](LayerNormOp o) {
            // Rows lead; the normalised dimension stays whole.
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getX()) - 1);
            b.operandDims(0, rows).resultDims(0, rows).resultDims(1, rows).resultDims(2, rows);
            return b.take();
          })
          .Case<LayerNormGradOp>([](LayerNormGradOp o) {
            // Weight and bias gradients take no row factor: partial when rows are sharded.
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getX()) - 1);
            b.operandDims(0, rows).operandDims(1, rows).operandDims(3, rows).operandDims(4, rows);
            b.resultDims(0, rows);
            return b.take();
          })
          .Case<RotaryOp, RotaryGradOp>([](Operation* o) {
            // Leading dimensions split freely; T splits with the tables' rows ([T, D], leading
            // 1s allowed), D stays whole.
            RuleBuilder b(o);
            const int64_t rank = rankOf(o->getOperand(0));
            SmallVector<int> lead = b.factors(rank - 2);
            const int positions = b.factor();
            b.operandDims(0, lead).resultDims(0, lead);
            b.operand(0, rank - 2, positions).result(0, rank - 2, positions);
            for (unsigned i : {1u, 2u}) b.operand(i, rankOf(o->getOperand(i)) - 2, positions);
            return b.take();
          })
          .Case<RmsNormOp>([](RmsNormOp o) {
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getX()) - 1);
            b.operandDims(0, rows).resultDims(0, rows).resultDims(1, rows);
            return b.take();
          })
          .Case<RmsNormGradOp>([](RmsNormGradOp o) {
            // The weight's gradient takes no row factor: partial when rows are sharded.
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getX()) - 1);
            b.operandDims(0, rows).operandDims(1, rows).operandDims(3, rows).resultDims(0, rows);
            return b.take();
          })
          .Case<MoeRouteOp, MoeRouteGradOp>([](Operation* o) {
            // Groups split freely; a group's slots are handed out in token order and a token
            // ranks every expert, so S and E stay whole.
            RuleBuilder b(o);
            int g = b.factor();
            for (unsigned i = 0; i < o->getNumOperands(); ++i) b.operand(i, 0, g);
            for (unsigned i = 0; i < o->getNumResults(); ++i) b.result(i, 0, g);
            return b.take();
          })
          .Case<MoeDispatchOp, MoeDispatchGradOp, MoeCombineOp, MoeCombineGradOp>(
              [](Operation* o) { return moeTokens(o); })
          .Case<LogSumExpOp, LogSumExpGradOp>([](Operation* o) {
            // Rows split freely; a row's log-sum-exp needs the whole row.
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o->getResult(0)) - isa<LogSumExpGradOp>(o));
            for (unsigned i = 0; i < o->getNumOperands(); ++i) b.operandDims(i, rows);
            b.resultDims(0, rows);
            return b.take();
          })
          .Case<EmbeddingOp>([](EmbeddingOp o) {
            // A split vocabulary: each device looks up the ids in its block (zeros elsewhere)
            // and the rows are summed over the devices.
            RuleBuilder b(o);
            SmallVector<int> ids = b.factors(rankOf(o.getIds()));
            int c = b.factor(), v = b.factor();
            b.operandDims(1, ids).operand(0, 0, v).operand(0, 1, c).resultDims(0, ids);
            b.result(0, ids.size(), c);
            return b.take();
          })
          .Case<EmbeddingGradOp>([](EmbeddingGradOp o) {
            RuleBuilder b(o);
            SmallVector<int> ids = b.factors(rankOf(o.getIds()));
            int c = b.factor(), v = b.factor();
            b.operandDims(1, ids).operandDims(0, ids).operand(0, ids.size(), c);
            b.result(0, 0, v).result(0, 1, c);
            return b.take();
          })
          .Case<CrossEntropyRowMaxOp>([](CrossEntropyRowMaxOp o) {
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getLogits()) - 1);
            int v = b.factor();
            b.operandDims(0, withClass(rows, v)).resultDims(0, rows).maximised(0, v);
            return b.take();
          })
          .Case<CrossEntropyPartsOp>([](CrossEntropyPartsOp o) {
            // Both results are sums over the vocabulary (the target is 0 off the label's block).
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getLogits()) - 1);
            int v = b.factor();
            b.operandDims(0, withClass(rows, v)).operandDims(1, rows).operandDims(2, rows);
            b.resultDims(0, rows).resultDims(1, rows);
            return b.take();
          })
          .Case<CrossEntropyCombineOp>([](CrossEntropyCombineOp o) {
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getRowMax()));
            b.operandDims(0, rows).operandDims(1, rows).operandDims(2, rows);
            if (o.getLabels()) b.operandDims(3, rows);
            return b.take();
          })
          .Case<CrossEntropyPartsGradOp>([](CrossEntropyPartsGradOp o) {
            RuleBuilder b(o);
            SmallVector<int> rows = b.factors(rankOf(o.getLogits()) - 1);
            int v = b.factor();
            SmallVector<int> logits = withClass(rows, v);
            b.operandDims(1, logits).operandDims(2, rows).operandDims(3, rows).operandDims(4, rows);
            b.resultDims(0, logits);
            return b.take();
          })
          .Case<Conv2dOp>([](Conv2dOp o) {
            RuleBuilder b(o);
            int n = b.factor(), oc = b.factor(), ic = b.factor();
            b.operand(0, 0, n).operand(0, 1, ic).operand(1, 0, oc).operand(1, 1, ic);
            b.result(0, 0, n).result(0, 1, oc);
            return b.take();
          })
          .Case<Conv2dGradInputOp>([](Conv2dGradInputOp o) {
            RuleBuilder b(o);
            int n = b.factor(), oc = b.factor(), ic = b.factor();
            b.operand(0, 0, n).operand(0, 1, oc).operand(1, 0, oc).operand(1, 1, ic);
            b.result(0, 0, n).result(0, 1, ic);
            return b.take();
          })
          .Case<Conv2dGradWeightOp>([](Conv2dGradWeightOp o) {
            RuleBuilder b(o);
            int n = b.factor(), oc = b.factor(), ic = b.factor();
            b.operand(0, 0, n).operand(0, 1, oc).operand(1, 0, n).operand(1, 1, ic);
            b.result(0, 0, oc).result(0, 1, ic);
            return b.take();
          })
          .Case<MaxPool2dOp, MaxPool2dGradOp>([](Operation* o) {
            RuleBuilder b(o);
            int n = b.factor(), c = b.factor();
            for (unsigned i = 0; i < o->getNumOperands(); ++i) b.operand(i, 0, n).operand(i, 1, c);
            b.result(0, 0, n).result(0, 1, c);
            return b.take();
          })
          .Case<BatchNormTrainOp, BatchNormTrainGradOp>([](Operation* o) { return perChannel(o); })
          .Case<BatchNormSumOp, BatchNormCenteredSquaresOp, BatchNormNormalizeOp,
                BatchNormGradSumsOp, BatchNormGradInputOp>(
              [](Operation* o) { return nchwWithChannels(o); })
          .Case<BatchNormEvalOp>([](BatchNormEvalOp o) {
            // Running statistics: samples are independent.
            RuleBuilder b(o);
            SmallVector<int> fs = b.factors(4);
            b.operandDims(0, fs).resultDims(0, fs);
            for (unsigned i = 1; i < 5; ++i) b.operand(i, 0, fs[1]);
            return b.take();
          })
          .Default([](Operation*) { return std::nullopt; });
  if (!rule) return op->emitOpError("has no sharding rule");
  return *rule;
}

}  // namespace dtc::sharding
