// FP8 training's ops: their verifiers, sharding rules and what they do to sequence positions.
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;
using namespace dtc::graph;

namespace {

bool oneElement(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements() == 1; }

}  // namespace

SmallVector<int64_t> Fp8QuantizeOp::transposedShape(ArrayRef<int64_t> x) {
  SmallVector<int64_t> t = {x.back()};
  t.append(x.begin(), x.end() - 1);
  return t;
}

// Rounding to bf16 on load reads float32.
static LogicalResult checkLoad(Operation* op, Value x, bool loadBf16) {
  if (loadBf16 && !elementOf(x).isF32()) return op->emitOpError("load_bf16 reads a float32 x");
  return success();
}

LogicalResult Fp8AmaxOp::verify() {
  if (!oneElement(getAmax())) return emitOpError("amax must be one float32");
  return checkLoad(*this, getX(), getLoadBf16());
}

// q (and q_t) of x, one-float scale_inv and amax: what both quantizations check.
static LogicalResult verifyQuantize(Operation* op, Value x, Value amax, Value q, Value scaleInv,
                                    ValueRange qT, bool loadBf16) {
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.empty() || shapeOf(q) != shape)
    return op->emitOpError("q must have x's shape (at least one dimension)");
  if (!oneElement(amax) || !oneElement(scaleInv))
    return op->emitOpError("amax and scale_inv must be one float32 each");
  if (qT.size() > 1) return op->emitOpError("at most one transposed copy");
  if (!qT.empty() && (shapeOf(qT[0]) != ArrayRef<int64_t>(Fp8QuantizeOp::transposedShape(shape)) ||
                      elementOf(qT[0]) != elementOf(q)))
    return op->emitOpError("q_t must be x's transpose (its last dimension first) in q's type");
  return checkLoad(op, x, loadBf16);
}

LogicalResult Fp8QuantizeOp::verify() {
  return verifyQuantize(*this, getX(), getAmax(), getQ(), getScaleInv(), getQT(), getLoadBf16());
}

LogicalResult Fp8QuantizeRecordedOp::verify() {
  if (!oneElement(getSeen())) return emitOpError("seen must be one float32");
  return verifyQuantize(*this, getX(), getAmax(), getQ(), getScaleInv(), getQT(), getLoadBf16());
}

LogicalResult Fp8HistoryAmaxOp::verify() {
  if (rankOf(getHistory()) != 1 || shapeOf(getHistory())[0] < 1 || !oneElement(getAmax()))
    return emitOpError("takes a history [H] and gives one float32");
  return success();
}

LogicalResult Fp8HistoryPushOp::verify() {
  if (rankOf(getHistory()) != 1 || getNewHistory().getType() != getHistory().getType())
    return emitOpError("new_history must be the history's [H]");
  if (getSeen().empty() || !llvm::all_of(getSeen(), oneElement))
    return emitOpError("takes one or more amaxes of one float32 each");
  return success();
}

LogicalResult Fp8GemmOp::verify() {
  ArrayRef<int64_t> a = shapeOf(getA()), b = shapeOf(getB()), out = shapeOf(getOut());
  const int64_t c = getContractDims();
  if (c < 1 || c >= static_cast<int64_t>(a.size()) || c >= static_cast<int64_t>(b.size()))
    return emitOpError("contract_dims must leave a and b a leading dimension each");
  if (a.take_back(c) != b.take_back(c))
    return emitOpError("a [M..., K...] and b [N..., K...] must share their contracted dimensions");
  SmallVector<int64_t> want(a.drop_back(c));
  want.append(b.begin(), b.end() - c);
  if (out != ArrayRef<int64_t>(want)) return emitOpError("out must be [M..., N...]");
  if (isa<Float8E5M2Type>(elementOf(getA())) && isa<Float8E5M2Type>(elementOf(getB())))
    return emitOpError("a and b cannot both be e5m2");
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding rules and sequence positions
//===----------------------------------------------------------------------===//

using dtc::sharding::OpShardingRule;
using dtc::sharding::RuleBuilder;
using dtc::sharding::SequenceTrace;

// The maximum over every dimension: a split one leaves each rank's amax partial, reduced by an
// all-reduce MAX before the quantizations that read it.
OpShardingRule Fp8AmaxOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> dims = b.factors(rankOf(getX()));
  b.operandDims(0, dims);
  for (int f : dims) b.maximised(0, f);
  return b.take();
}
// A maximum: the positions' order cannot change it.
void Fp8AmaxOp::traceSequence(SequenceTrace&) {}

// Element-wise under a whole-tensor amax: q splits as x does, q_t with x's last dimension first;
// scale_inv depends on the amax alone, and a recorded amax is a maximum over every dimension.
static OpShardingRule quantizeRule(Operation* op, Value x, bool recorded, bool transposed) {
  RuleBuilder b(op);
  SmallVector<int> dims = b.factors(rankOf(x));
  b.operandDims(0, dims).resultDims(0, dims);
  const unsigned qT = recorded ? 3 : 2;
  if (transposed) {
    b.result(qT, 0, dims.back());
    for (size_t d = 0; d + 1 < dims.size(); ++d) b.result(qT, d + 1, dims[d]);
  }
  for (int f : dims) {
    b.independent(1, f);
    if (recorded) b.maximised(2, f);
  }
  return b.take();
}

// The scale comes from the amax, which holds every position: each position's codes depend on
// its own value alone.
static void quantizeSequence(SequenceTrace& trace, Value x, Value q, ValueRange qT) {
  if (trace.operand() != 0) return;
  const int64_t d = trace.dim();
  trace.set(q, d);
  if (!qT.empty()) trace.set(qT[0], d + 1 == rankOf(x) ? 0 : d + 1);
}

OpShardingRule Fp8QuantizeOp::getShardingRule() {
  return quantizeRule(*this, getX(), false, !getQT().empty());
}
void Fp8QuantizeOp::traceSequence(SequenceTrace& trace) {
  quantizeSequence(trace, getX(), getQ(), getQT());
}

OpShardingRule Fp8QuantizeRecordedOp::getShardingRule() {
  return quantizeRule(*this, getX(), true, !getQT().empty());
}
void Fp8QuantizeRecordedOp::traceSequence(SequenceTrace& trace) {
  quantizeSequence(trace, getX(), getQ(), getQT());
}

// A history is a few floats every rank holds whole.
OpShardingRule Fp8HistoryAmaxOp::getShardingRule() { return RuleBuilder(*this).take(); }
void Fp8HistoryAmaxOp::traceSequence(SequenceTrace&) {}
OpShardingRule Fp8HistoryPushOp::getShardingRule() { return RuleBuilder(*this).take(); }
void Fp8HistoryPushOp::traceSequence(SequenceTrace&) {}

// A GEMM over the contracted dimensions: out sums over them.
OpShardingRule Fp8GemmOp::getShardingRule() {
  RuleBuilder b(*this);
  const int64_t c = getContractDims();
  SmallVector<int> m = b.factors(rankOf(getA()) - c), n = b.factors(rankOf(getB()) - c),
                   k = b.factors(c);
  auto joined = [](ArrayRef<int> first, ArrayRef<int> second) {
    SmallVector<int> dims(first);
    dims.append(second.begin(), second.end());
    return dims;
  };
  b.operandDims(0, joined(m, k)).operandDims(1, joined(n, k)).resultDims(0, joined(m, n));
  return b.take();
}
void Fp8GemmOp::traceSequence(SequenceTrace& trace) { dtc::sharding::sequenceOverFeatures(trace); }
