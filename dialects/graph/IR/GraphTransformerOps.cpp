// Shape rules, type inference and verifiers of the transformer ops (GraphTransformerOps.td).
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace dtc::graph;

namespace dtc::graph {

std::optional<std::string> checkBatchMatmul(ArrayRef<int64_t> a, ArrayRef<int64_t> b, bool tA,
                                            bool tB) {
  if (a.size() < 3 || a.size() != b.size())
    return "batch_matmul needs operands of one rank >= 3, got " + shapeString(a) + " and " +
           shapeString(b);
  size_t r = a.size();
  if (a.drop_back(2) != b.drop_back(2))
    return "batch_matmul batch dimensions differ: " + shapeString(a) + " and " + shapeString(b);
  int64_t ka = tA ? a[r - 2] : a[r - 1], kb = tB ? b[r - 1] : b[r - 2];
  if (ka != kb)
    return "batch_matmul contraction sizes differ: " + shapeString(a) + (tA ? "^T" : "") + " x " +
           shapeString(b) + (tB ? "^T" : "") + " (" + std::to_string(ka) + " vs " +
           std::to_string(kb) + ")";
  return std::nullopt;
}

std::optional<std::string> checkPermutation(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  if (perm.size() != shape.size() ||
      !llvm::equal(sorted, llvm::seq<int64_t>(0, static_cast<int64_t>(shape.size()))))
    return "perm " + shapeString(perm) + " is not a permutation of the dimensions of " +
           shapeString(shape);
  return std::nullopt;
}

std::optional<std::string> checkSplit(ArrayRef<int64_t> shape, int64_t axis, int64_t parts,
                                      ArrayRef<int64_t> sizes) {
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return "split axis " + std::to_string(axis) + " out of range for shape " + shapeString(shape);
  if (!sizes.empty()) {
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s <= 0 || s > shape[axis] - total) {
        total = -1;
        break;
      }
      total += s;
    }
    if (static_cast<int64_t>(sizes.size()) != parts || total != shape[axis])
      return "cannot split dimension " + std::to_string(axis) + " of " + shapeString(shape) +
             " into " + std::to_string(parts) + " pieces of sizes " + shapeString(sizes);
    return std::nullopt;
  }
  if (parts <= 0 || shape[axis] % parts != 0)
    return "cannot split dimension " + std::to_string(axis) + " of " + shapeString(shape) +
           " into " + std::to_string(parts) + " equal parts";
  return std::nullopt;
}

std::optional<std::string> checkLayerNorm(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                                          ArrayRef<int64_t> b) {
  if (x.empty() || w.size() != 1 || b.size() != 1 || w[0] != x.back() || b[0] != x.back())
    return "layer_norm needs weight and bias of shape [" +
           (x.empty() ? std::string("?") : std::to_string(x.back())) + "], got " + shapeString(w) +
           " and " + shapeString(b) + " for input " + shapeString(x);
  return std::nullopt;
}

std::optional<std::string> checkRmsNorm(ArrayRef<int64_t> x, ArrayRef<int64_t> w) {
  if (x.empty() || w.size() != 1 || w[0] != x.back())
    return "rms_norm needs a weight of shape [" +
           (x.empty() ? std::string("?") : std::to_string(x.back())) + "], got " + shapeString(w) +
           " for input " + shapeString(x);
  return std::nullopt;
}

std::optional<std::string> checkRotary(ArrayRef<int64_t> x, ArrayRef<int64_t> cos,
                                       ArrayRef<int64_t> sin) {
  auto table = [&](ArrayRef<int64_t> t) {
    if (x.size() < 2 || t.size() < 2 || t.size() > x.size()) return false;
    for (size_t i = 0; i + 2 < t.size(); ++i)
      if (t[i] != 1) return false;
    return t.take_back(2) == x.take_back(2);
  };
  if (x.size() < 2 || x.back() % 2 != 0 || !table(cos) || sin != cos)
    return "rotary needs x [..., T, D] with D even and cos, sin [T, D], got " + shapeString(x) +
           ", " + shapeString(cos) + " and " + shapeString(sin);
  return std::nullopt;
}

std::optional<std::string> checkEmbedding(ArrayRef<int64_t> table) {
  if (table.size() != 2) return "embedding table must be [vocab, dim], got " + shapeString(table);
  return std::nullopt;
}

}  // namespace dtc::graph

LogicalResult BatchMatmulOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> a = shapeOf(adaptor.getLhs()), b = shapeOf(adaptor.getRhs());
  bool tA = adaptor.getTransposeLhs(), tB = adaptor.getTransposeRhs();
  if (auto error = checkBatchMatmul(a, b, tA, tB)) return emitOptionalError(loc, *error);
  size_t r = a.size();
  SmallVector<int64_t> shape(a.drop_back(2));
  shape.push_back(tA ? a[r - 1] : a[r - 2]);
  shape.push_back(tB ? b[r - 2] : b[r - 1]);
  mlir::Type element = contractionElement(adaptor.getLhs(), adaptor.getRhs());
  if (!element) return emitOptionalError(loc, "batch_matmul: operands of different element types");
  types.push_back(RankedTensorType::get(shape, element));
  return success();
}

// Attention's queries [..., H, T, D] against keys [..., Hk, Tk, D]: the same leading dimensions
// and D, and heads that Hk divides (grouped-query attention: each key/value head serves H/Hk
// consecutive query heads). Tk > T where a device holds a block of the queries and the whole
// sequence's keys.
static bool attentionBlocksMatch(ArrayRef<int64_t> q, ArrayRef<int64_t> k) {
  if (q.size() < 2 || k.size() != q.size() || q.back() != k.back()) return false;
  if (q.size() == 2) return true;
  const size_t heads = q.size() - 3;
  return q.take_front(heads) == k.take_front(heads) && k[heads] > 0 && q[heads] % k[heads] == 0;
}

LogicalResult CausalAttentionOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> q = shapeOf(adaptor.getQ()), k = shapeOf(adaptor.getK()),
                    v = shapeOf(adaptor.getV());
  if (!attentionBlocksMatch(q, k) || k != v)
    return emitOptionalError(loc,
                             "causal_attention: q, k and v must share one shape [..., T, D] (k "
                             "and v may hold more positions, the whole sequence, and fewer "
                             "heads, dividing q's), got ",
                             shapeString(q), ", ", shapeString(k), ", ", shapeString(v));
  mlir::Type element = commonElement({adaptor.getQ(), adaptor.getK(), adaptor.getV()});
  if (!element)
    return emitOptionalError(loc, "causal_attention: q, k and v of different element types");
  types.push_back(RankedTensorType::get(q, element));
  types.push_back(f32Tensor(ctx, q.drop_back()));
  return success();
}

LogicalResult CausalAttentionGradOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> q = shapeOf(adaptor.getQ()), k = shapeOf(adaptor.getK());
  if (!attentionBlocksMatch(q, k) || shapeOf(adaptor.getDout()) != q ||
      shapeOf(adaptor.getV()) != k || shapeOf(adaptor.getOut()) != q ||
      shapeOf(adaptor.getLse()) != q.drop_back())
    return emitOptionalError(loc, "causal_attention_grad: operands do not match q ", shapeString(q),
                             " and k ", shapeString(k));
  mlir::Type element = commonElement(
      {adaptor.getDout(), adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getOut()});
  if (!element)
    return emitOptionalError(
        loc, "causal_attention_grad: dout, q, k, v and out of different element types");
  types.push_back(RankedTensorType::get(q, element));
  for (int i = 0; i < 2; ++i) types.push_back(RankedTensorType::get(k, element));
  return success();
}

LogicalResult AttentionMergeOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                                 Adaptor adaptor, SmallVectorImpl<Type>& types) {
  Type a = adaptor.getOutA().getType(), la = adaptor.getLseA().getType();
  ArrayRef<int64_t> out = shapeOf(adaptor.getOutA());
  if (a != adaptor.getOutB().getType() || la != adaptor.getLseB().getType() || out.empty() ||
      shapeOf(adaptor.getLseA()) != out.drop_back())
    return emitOptionalError(loc,
                             "attention_merge: needs two out [..., T, D] of one type and "
                             "their lse [..., T], got ",
                             shapeString(out), " and ", shapeString(shapeOf(adaptor.getLseA())));
  types.push_back(a);
  types.push_back(la);
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  if (auto error = checkPermutation(x, adaptor.getPerm())) return emitOptionalError(loc, *error);
  SmallVector<int64_t> shape;
  for (int64_t p : adaptor.getPerm()) shape.push_back(x[p]);
  types.push_back(RankedTensorType::get(shape, elementOf(adaptor.getX())));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                        SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  int64_t axis = adaptor.getAxis(), parts = adaptor.getParts();
  ArrayRef<int64_t> sizes;
  if (adaptor.getSizes()) sizes = *adaptor.getSizes();
  if (auto error = checkSplit(x, axis, parts, sizes)) return emitOptionalError(loc, *error);
  SmallVector<int64_t> shape(x);
  for (int64_t p = 0; p < parts; ++p) {
    shape[axis] = sizes.empty() ? x[axis] / parts : sizes[p];
    types.push_back(RankedTensorType::get(shape, elementOf(adaptor.getX())));
  }
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext*, std::optional<Location> loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& types) {
  ValueRange pieces = adaptor.getPieces();
  if (pieces.empty()) return emitOptionalError(loc, "concat needs at least one piece");
  ArrayRef<int64_t> first = shapeOf(pieces.front());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= static_cast<int64_t>(first.size()))
    return emitOptionalError(loc, "concat axis out of range for ", shapeString(first));
  SmallVector<int64_t> shape(first);
  shape[axis] = 0;
  for (Value v : pieces) {
    ArrayRef<int64_t> piece = shapeOf(v);
    if (piece.size() != first.size())
      return emitOptionalError(loc, "concat pieces must have one rank");
    for (size_t d = 0; d < first.size(); ++d)
      if (static_cast<int64_t>(d) != axis && piece[d] != first[d])
        return emitOptionalError(loc, "concat pieces differ beyond the axis: ", shapeString(first),
                                 " and ", shapeString(piece));
    shape[axis] += piece[axis];
  }
  mlir::Type element = commonElement(pieces);
  if (!element) return emitOptionalError(loc, "concat pieces of different element types");
  types.push_back(RankedTensorType::get(shape, element));
  return success();
}

LogicalResult CausalSoftmaxOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getX());
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
    return emitOpError("needs square [..., T, T] scores, got ") << shapeString(x);
  return success();
}

LogicalResult SoftmaxOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getX());
  if (x.empty() || x.back() == 0)
    return emitOpError("needs [..., N] with N > 0, got ") << shapeString(x);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  if (auto error = checkLayerNorm(x, shapeOf(adaptor.getWeight()), shapeOf(adaptor.getBias())))
    return emitOptionalError(loc, *error);
  types.push_back(adaptor.getX().getType());
  types.append(2, f32Tensor(ctx, x.drop_back()));
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext*, std::optional<Location>,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.push_back(adaptor.getX().getType());
  types.push_back(adaptor.getWeight().getType());
  types.push_back(adaptor.getWeight().getType());
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> x = shapeOf(adaptor.getX());
  if (auto error = checkRmsNorm(x, shapeOf(adaptor.getWeight())))
    return emitOptionalError(loc, *error);
  types.push_back(f32Tensor(ctx, x));
  types.push_back(f32Tensor(ctx, x.drop_back()));
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location>,
                                              Adaptor adaptor, SmallVectorImpl<Type>& types) {
  types.push_back(f32Tensor(ctx, shapeOf(adaptor.getX())));
  types.push_back(adaptor.getWeight().getType());
  return success();
}

bool RmsNormOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return narrowableFirstResult(l, r);
}
bool RmsNormGradOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return narrowableFirstResult(l, r);
}

// ---- 16-bit storage (LowPrecisionStorageOpInterface) -------------------------------------------
// Parameters (norm weights) and the tables of rotary stay f32, as do the norms' statistics.

bool LayerNormOp::widensOperand(unsigned) { return false; }
bool LayerNormOp::roundsResult(unsigned index) { return index == 0; }
bool LayerNormGradOp::widensOperand(unsigned index) { return index == 0; }
bool LayerNormGradOp::roundsResult(unsigned) { return false; }
bool RmsNormOp::widensOperand(unsigned index) { return index == 0; }
bool RmsNormOp::roundsResult(unsigned index) { return index == 0; }
bool RmsNormGradOp::widensOperand(unsigned index) { return index <= 1; }
bool RmsNormGradOp::roundsResult(unsigned index) { return index == 0; }
bool SwigluOp::widensOperand(unsigned) { return true; }
bool SwigluOp::roundsResult(unsigned) { return true; }
bool SwigluGradOp::widensOperand(unsigned) { return true; }
bool SwigluGradOp::roundsResult(unsigned) { return true; }
bool RotaryOp::widensOperand(unsigned index) { return index == 0; }
bool RotaryOp::roundsResult(unsigned) { return true; }
bool RotaryGradOp::widensOperand(unsigned index) { return index == 0; }
bool RotaryGradOp::roundsResult(unsigned) { return true; }

LogicalResult RotaryOp::verify() {
  if (auto error = checkRotary(shapeOf(getX()), shapeOf(getCos()), shapeOf(getSin())))
    return emitOpError(*error);
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type>& types) {
  ArrayRef<int64_t> table = shapeOf(adaptor.getTable());
  if (auto error = checkEmbedding(table)) return emitOptionalError(loc, *error);
  SmallVector<int64_t> shape(shapeOf(adaptor.getIds()));
  shape.push_back(table[1]);
  types.push_back(f32Tensor(ctx, shape));
  return success();
}

LogicalResult EmbeddingGradOp::inferReturnTypes(MLIRContext* ctx, std::optional<Location>,
                                                Adaptor adaptor, SmallVectorImpl<Type>& types) {
  int64_t vocab = static_cast<int64_t>(adaptor.getVocab());
  types.push_back(f32Tensor(ctx, {vocab, shapeOf(adaptor.getDy()).back()}));
  return success();
}

bool LayerNormOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return narrowableFirstResult(l, r);
}
