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

std::optional<std::string> RotaryOp::checkShapes(ArrayRef<int64_t> x, ArrayRef<int64_t> cos,
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

// ---- 16-bit storage (LowPrecisionStorageOpInterface) -------------------------------------------
// The tables of rotary stay f32.

bool SwigluOp::widensOperand(unsigned) { return true; }
bool SwigluOp::roundsResult(unsigned) { return true; }
bool SwigluGradOp::widensOperand(unsigned) { return true; }
bool SwigluGradOp::roundsResult(unsigned) { return true; }
bool RotaryOp::widensOperand(unsigned index) { return index == 0; }
bool RotaryOp::roundsResult(unsigned) { return true; }
bool RotaryGradOp::widensOperand(unsigned index) { return index == 0; }
bool RotaryGradOp::roundsResult(unsigned) { return true; }

LogicalResult RotaryOp::verify() {
  if (auto error = checkShapes(shapeOf(getX()), shapeOf(getCos()), shapeOf(getSin())))
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

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

namespace {

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

// Rotary embeddings and their gradient: leading dimensions split freely; T splits with the
// tables' rows ([T, D], leading 1s allowed), D stays whole.
OpShardingRule rotaryRule(Operation* op) {
  RuleBuilder b(op);
  const int64_t rank = rankOf(op->getOperand(0));
  SmallVector<int> lead = b.factors(rank - 2);
  const int positions = b.factor();
  b.operandDims(0, lead).resultDims(0, lead);
  b.operand(0, rank - 2, positions).result(0, rank - 2, positions);
  for (unsigned i : {1u, 2u}) b.operand(i, rankOf(op->getOperand(i)) - 2, positions);
  return b.take();
}

// Rotation by position: x [..., T, D] with tables cos and sin [T, D], which are indexed by
// position with the sequence.
void rotarySequence(Operation* op, SequenceTrace& trace) {
  const int64_t t = rankOf(op->getOperand(0)) - 2;
  if (trace.operand() != 0 || trace.dim() != t)
    return trace.ordered("rotates along another dimension");
  trace.set(op->getResult(0), t);
  for (Value table : {op->getOperand(1), op->getOperand(2)})
    if (!trace.reached(table)) trace.table(table, rankOf(table) - 2);
}

}  // namespace

OpShardingRule BatchMatmulOp::getShardingRule() {
  return dtc::sharding::matmulRule(*this, getTransposeLhs(), getTransposeRhs(),
                                   rankOf(getLhs()) - 2);
}
void BatchMatmulOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("contracts, which the trace does not follow");
}

OpShardingRule TransposeOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> fs = b.factors(rankOf(getX()));
  b.operandDims(0, fs);
  for (auto [d, p] : llvm::enumerate(getPerm())) b.result(0, d, fs[p]);
  return b.take();
}
void TransposeOp::traceSequence(SequenceTrace& trace) {
  for (auto [j, p] : llvm::enumerate(getPerm()))
    if (p == trace.dim()) trace.set(getResult(), static_cast<int64_t>(j));
}

OpShardingRule SplitOp::getShardingRule() {
  if (getSizes()) return unevenPieces(*this, getAxis());
  return splitOrConcat(*this, getAxis(), getParts(), /*isSplit=*/true);
}
void SplitOp::traceSequence(SequenceTrace& trace) {
  if (static_cast<int64_t>(getAxis()) == trace.dim()) return trace.ordered("splits the sequence");
  for (Value r : getResults()) trace.set(r, trace.dim());
}

OpShardingRule ConcatOp::getShardingRule() {
  for (Value piece : getPieces())
    if (piece.getType() != getPieces().front().getType()) return unevenPieces(*this, getAxis());
  return splitOrConcat(*this, getAxis(), getPieces().size(), /*isSplit=*/false);
}
void ConcatOp::traceSequence(SequenceTrace& trace) {
  if (static_cast<int64_t>(getAxis()) == trace.dim())
    return trace.ordered("concatenates along the sequence");
  trace.set(getResult(), trace.dim());
}

// Causal softmax over scores [..., T, T]: a row's softmax reads the positions before it.
OpShardingRule CausalSoftmaxOp::getShardingRule() {
  return dtc::sharding::leadingRule(*this, rankOf(getResult()), 2);
}
void CausalSoftmaxOp::traceSequence(SequenceTrace& trace) { trace.ordered("mixes positions"); }
OpShardingRule CausalSoftmaxGradOp::getShardingRule() {
  return dtc::sharding::leadingRule(*this, rankOf(getResult()), 2);
}
void CausalSoftmaxGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

OpShardingRule SoftmaxOp::getShardingRule() {
  return dtc::sharding::leadingRule(*this, rankOf(getResult()), 1);
}
void SoftmaxOp::traceSequence(SequenceTrace& trace) { dtc::sharding::sequenceOverFeatures(trace); }
OpShardingRule SoftmaxGradOp::getShardingRule() {
  return dtc::sharding::leadingRule(*this, rankOf(getResult()), 1);
}
void SoftmaxGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

OpShardingRule CausalAttentionOp::getShardingRule() {
  // Batch and heads split freely, and so do the queries (context parallelism: the kernel places
  // its block of them by `seq_axes`); a query needs every key, so k and v stay whole along T,
  // and D everywhere.
  RuleBuilder b(*this);
  const int64_t rank = rankOf(getQ());
  SmallVector<int> lead = b.factors(rank - 2);
  const int queries = b.factor();
  for (unsigned i = 0; i < 3; ++i) b.operandDims(i, lead);
  b.operand(0, rank - 2, queries);
  b.resultDims(0, lead).resultDims(1, lead);
  b.result(0, rank - 2, queries).result(1, rank - 2, queries);
  return b.take();
}
void CausalAttentionOp::traceSequence(SequenceTrace& trace) {
  // Attention knows positions (seq_axes, seq_chunks): q, k and v carry the sequence at -2, or it
  // reaches attention some other way.
  const int64_t t = rankOf(getQ()) - 2;
  for (const SequenceTrace::Carried& c : trace.carried())
    if (c.dim != t) return trace.ordered("reaches attention along another dimension");
  trace.set(getOut(), t);
  trace.set(getLse(), t);
}

OpShardingRule CausalAttentionGradOp::getShardingRule() {
  // As the forward; dk and dv sum over the queries, so they are partial where the queries are
  // split.
  RuleBuilder b(*this);
  const int64_t rank = rankOf(getQ());
  SmallVector<int> lead = b.factors(rank - 2);
  const int queries = b.factor();
  for (unsigned i = 0; i < 6; ++i) b.operandDims(i, lead);
  for (unsigned i : {0u, 1u, 4u, 5u}) b.operand(i, rank - 2, queries);
  for (unsigned i = 0; i < 3; ++i) b.resultDims(i, lead);
  b.result(0, rank - 2, queries);
  return b.take();
}
void CausalAttentionGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

// Merges two attention results of the same queries: rows lead, each row's D whole.
OpShardingRule AttentionMergeOp::getShardingRule() {
  return dtc::sharding::leadingRule(*this, rankOf(getOut()), 1);
}
void AttentionMergeOp::traceSequence(SequenceTrace& trace) {
  trace.ordered("merges partial attention, which the trace does not follow");
}

OpShardingRule SwigluOp::getShardingRule() { return dtc::sharding::elementwiseRule(*this); }
void SwigluOp::traceSequence(SequenceTrace& trace) { dtc::sharding::sequenceOverFeatures(trace); }

OpShardingRule RotaryOp::getShardingRule() { return rotaryRule(*this); }
void RotaryOp::traceSequence(SequenceTrace& trace) { rotarySequence(*this, trace); }
OpShardingRule RotaryGradOp::getShardingRule() { return rotaryRule(*this); }
void RotaryGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

OpShardingRule EmbeddingOp::getShardingRule() {
  // A split vocabulary: each device looks up the ids in its block (zeros elsewhere) and the rows
  // are summed over the devices.
  RuleBuilder b(*this);
  SmallVector<int> ids = b.factors(rankOf(getIds()));
  int c = b.factor(), v = b.factor();
  b.operandDims(1, ids).operand(0, 0, v).operand(0, 1, c).resultDims(0, ids);
  b.result(0, ids.size(), c);
  return b.take();
}
void EmbeddingOp::traceSequence(SequenceTrace& trace) {
  if (getIds() != getOperand(trace.operand())) return trace.ordered("indexes a table by position");
  trace.set(getResult(), trace.dim());
}

OpShardingRule EmbeddingGradOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> ids = b.factors(rankOf(getIds()));
  int c = b.factor(), v = b.factor();
  b.operandDims(1, ids).operandDims(0, ids).operand(0, ids.size(), c);
  b.result(0, 0, v).result(0, 1, c);
  return b.take();
}
// Each position's gradient is added into its token's row: a sum, the same in any order.
void EmbeddingGradOp::traceSequence(SequenceTrace& trace) {
  dtc::sharding::sequenceStopsAtGradient(trace);
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

using Grads = FailureOr<SmallVector<Value>>;

// Same rule as MatmulOp, batch by batch.
Grads BatchMatmulOp::buildGradients(OpBuilder& b, ValueRange dys) {
  Value dC = dys[0], A = getLhs(), B = getRhs();
  bool tA = getTransposeLhs(), tB = getTransposeRhs();
  Location loc = getLoc();
  Value dA = tA ? BatchMatmulOp::create(b, loc, B, dC, tB, true)
                : BatchMatmulOp::create(b, loc, dC, B, false, !tB);
  Value dB = tB ? BatchMatmulOp::create(b, loc, dC, A, true, tA)
                : BatchMatmulOp::create(b, loc, A, dC, !tA, false);
  return SmallVector<Value>{dA, dB};
}

Grads TransposeOp::buildGradients(OpBuilder& b, ValueRange dys) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm)) inverse[p] = i;
  return SmallVector<Value>{TransposeOp::create(b, getLoc(), dys[0], inverse)};
}

Grads SplitOp::buildGradients(OpBuilder& b, ValueRange dys) {
  // Pieces the loss does not use contribute zeros.
  SmallVector<Value> pieces;
  for (auto [piece, dy] : llvm::zip(getPieces(), dys))
    pieces.push_back(
        dy ? dy : Value(FillOp::create(b, getLoc(), piece.getType(), b.getF32FloatAttr(0.0f))));
  return SmallVector<Value>{ConcatOp::create(b, getLoc(), pieces, getAxis())};
}

Grads ConcatOp::buildGradients(OpBuilder& b, ValueRange dys) {
  const int64_t axis = getAxis(), parts = static_cast<int64_t>(getPieces().size());
  SmallVector<int64_t> sizes;
  for (Value piece : getPieces())
    sizes.push_back(cast<RankedTensorType>(piece.getType()).getDimSize(axis));
  const bool equal = llvm::all_equal(sizes);
  auto split = SplitOp::create(b, getLoc(), dys[0], axis, parts,
                               equal ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(sizes));
  return SmallVector<Value>(split.getPieces());
}

Grads CausalSoftmaxOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{
      CausalSoftmaxGradOp::create(b, getLoc(), dys[0], getY(), getScaleAttr())};
}

Grads SoftmaxOp::buildGradients(OpBuilder& b, ValueRange dys) {
  return SmallVector<Value>{
      SoftmaxGradOp::create(b, getLoc(), dys[0], getY(), getScaleAttr(), getLogAttr())};
}

Grads CausalAttentionOp::buildGradients(OpBuilder& b, ValueRange dys) {
  // lse is a by-product for the backward pass; only out carries a gradient.
  if (!dys[0]) return SmallVector<Value>{Value(), Value(), Value()};
  auto grad = CausalAttentionGradOp::create(b, getLoc(), dys[0], getQ(), getK(), getV(), getOut(),
                                            getLse(), getScaleAttr());
  return SmallVector<Value>{grad.getDq(), grad.getDk(), grad.getDv()};
}

Grads SwigluOp::buildGradients(OpBuilder& b, ValueRange dys) {
  auto grad = SwigluGradOp::create(b, getLoc(), getGate().getType(), getUp().getType(), dys[0],
                                   getGate(), getUp());
  return SmallVector<Value>{grad.getDgate(), grad.getDup()};
}

Grads RotaryOp::buildGradients(OpBuilder& b, ValueRange dys) {
  // cos and sin are tables (the fusion takes them only where nothing trains them).
  Value dx = RotaryGradOp::create(b, getLoc(), getX().getType(), dys[0], getCos(), getSin());
  return SmallVector<Value>{dx, Value(), Value()};
}

Grads EmbeddingOp::buildGradients(OpBuilder& b, ValueRange dys) {
  int64_t vocab = shapeOf(getTable())[0];
  auto grad = EmbeddingGradOp::create(b, getLoc(), dys[0], getIds(), vocab, getPaddingIdxAttr());
  return SmallVector<Value>{grad.getResult(), Value()};
}
