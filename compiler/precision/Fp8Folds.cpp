// dtc-fold-casts' rewrites around FP8 quantization (see Passes.td). Each is exact: the codes
// and scales are those of the unfolded plan.
#include "precision/Fp8Folds.h"

#include "mlir/IR/PatternMatch.h"

#include "OpMarks.h"
#include "dist/IR/DistOps.h"
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;

namespace dtc {
namespace {

// An FP8 tensor moves as 4-byte words (the moving collectives' contract).
bool movesAsWords(Type type) { return cast<RankedTensorType>(type).getShape().back() % 4 == 0; }

// quantize(all_gather(s), amax(all_gather(s))) becomes all_gather(quantize(s, amax')) with
// amax' the shards' amaxes reduced by an all-reduce MAX over the gather's axes: every rank
// quantizes its shard with the whole tensor's scale, so the gathered codes are the codes of the
// gathered tensor, and the gather moves one byte an element where the 16-bit one moved two
// (ZeRO-3's FP8 all-gather). A transposed copy is made from the gathered codes (a 1-byte
// transpose), not gathered too, which would move as many bytes as the 16-bit gather.
struct QuantizeBeforeGather : OpRewritePattern<graph::Fp8QuantizeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(graph::Fp8QuantizeOp quantize,
                                PatternRewriter& rewriter) const override {
    auto gather = quantize.getX().getDefiningOp<dist::AllGatherOp>();
    auto amax = quantize.getAmax().getDefiningOp<graph::Fp8AmaxOp>();
    if (!gather || !amax || amax.getX() != gather.getResult()) return failure();
    for (Operation* user : gather.getResult().getUsers())
      if (!isa<graph::Fp8QuantizeOp, graph::Fp8AmaxOp>(user)) return failure();
    Value shard = gather.getX();
    const int64_t dim = gather.getDim();
    const int64_t parts = graph::shapeOf(gather.getResult())[dim] / graph::shapeOf(shard)[dim];
    auto cut = [&](Value r, int64_t d) {
      SmallVector<int64_t> shape(graph::shapeOf(r));
      shape[d] /= parts;
      return RankedTensorType::get(shape, graph::elementOf(r));
    };
    SmallVector<Type> types = {cut(quantize.getQ(), dim), quantize.getScaleInv().getType()};
    if (!movesAsWords(types[0]) || !movesAsWords(quantize.getQ().getType())) return failure();
    Location loc = quantize.getLoc();
    rewriter.setInsertionPoint(quantize);
    auto shardAmax = graph::Fp8AmaxOp::create(rewriter, amax.getLoc(), amax.getType(), shard,
                                              amax.getLoadBf16Attr());
    inheritMarks(amax, shardAmax);
    auto reduced = dist::AllReduceOp::create(rewriter, loc, TypeRange{amax.getType()},
                                             ValueRange{shardAmax}, gather.getAxesAttr(), "max");
    inheritMarks(gather, reduced);
    auto local8 = graph::Fp8QuantizeOp::create(rewriter, loc, types, shard, reduced.getResult(0),
                                               quantize.getLoadBf16Attr());
    inheritMarks(quantize, local8);
    auto gathered = [&](Value v, Type type, int64_t d) -> Value {
      auto op = dist::AllGatherOp::create(rewriter, gather.getLoc(), type, v, gather.getAxesAttr(),
                                          rewriter.getI64IntegerAttr(d));
      inheritMarks(gather, op);
      return op;
    };
    SmallVector<Value> results = {gathered(local8.getQ(), quantize.getQ().getType(), dim),
                                  local8.getScaleInv()};
    if (!quantize.getQT().empty()) {
      // q_t: the gathered codes' last dimension first.
      const int64_t rank = graph::rankOf(results[0]);
      SmallVector<int64_t> perm = {rank - 1};
      for (int64_t d = 0; d + 1 < rank; ++d) perm.push_back(d);
      auto transpose = graph::TransposeOp::create(rewriter, loc, quantize.getQT()[0].getType(),
                                                  results[0], rewriter.getDenseI64ArrayAttr(perm));
      inheritMarks(quantize, transpose);
      results.push_back(transpose);
    }
    rewriter.replaceOp(quantize, results);
    if (amax->use_empty()) rewriter.eraseOp(amax);
    return success();
  }
};

// amax(cast(x: f32 → bf16)) and quantize(cast(x: f32 → bf16), ...) read x and round each
// element to bf16 as they load it: the same values, without the 16-bit copy (mixed precision's
// copy of a weight, which only the FP8 layer read). The cast stays while others read it. Not
// under an all-gather, which should move the 16-bit values (or, above, the codes).
template <typename Op>
struct AbsorbNarrowingIntoFp8 : OpRewritePattern<Op> {
  using OpRewritePattern<Op>::OpRewritePattern;
  LogicalResult matchAndRewrite(Op op, PatternRewriter& rewriter) const override {
    auto cast = op.getX().template getDefiningOp<graph::CastOp>();
    if (!cast || !graph::elementOf(cast.getX()).isF32() ||
        !graph::elementOf(cast.getY()).isBF16() ||
        isa_and_nonnull<dist::AllGatherOp>(cast.getX().getDefiningOp()))
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op.getXMutable().assign(cast.getX());
      op.setLoadBf16(true);
    });
    if (cast->use_empty()) rewriter.eraseOp(cast);
    return success();
  }
};

}  // namespace

void populateFp8FoldPatterns(RewritePatternSet& patterns) {
  MLIRContext* ctx = patterns.getContext();
  patterns.add<QuantizeBeforeGather, AbsorbNarrowingIntoFp8<graph::Fp8AmaxOp>,
               AbsorbNarrowingIntoFp8<graph::Fp8QuantizeOp>,
               AbsorbNarrowingIntoFp8<graph::Fp8QuantizeRecordedOp>>(ctx);
}

}  // namespace dtc
