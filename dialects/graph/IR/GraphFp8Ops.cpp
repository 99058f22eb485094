// FP8 training's ops: their verifiers, sharding rules and what they do to sequence positions.
#include "graph/IR/GraphOps.h"
#include "graph/IR/TypeUtils.h"

using namespace mlir;
using namespace dtc::graph;

namespace {

bool oneElement(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements() == 1; }

// x [d0, ..., dn-2, C] transposed to [C, d0, ..., dn-2].
SmallVector<int64_t> transposedShape(ArrayRef<int64_t> x) {
  SmallVector<int64_t> t = {x.back()};
  t.append(x.begin(), x.end() - 1);
  return t;
}

}  // namespace

// Rounding to bf16 on load reads float32.
static LogicalResult checkLoad(Operation* op, Value x, bool loadBf16) {
  if (loadBf16 && !elementOf(x).isF32()) return op->emitOpError("load_bf16 reads a float32 x");
  return success();
}

LogicalResult Fp8AmaxOp::verify() {
  if (!oneElement(getAmax())) return emitOpError("amax must be one float32");
  return checkLoad(*this, getX(), getLoadBf16());
}

LogicalResult Fp8QuantizeOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getX());
  if (x.empty() || shapeOf(getQ()) != x)
    return emitOpError("q must have x's shape (at least one dimension)");
  if (!oneElement(getAmax()) || !oneElement(getScaleInv()))
    return emitOpError("amax and scale_inv must be one float32 each");
  if (getQT().size() > 1) return emitOpError("at most one transposed copy");
  if (!getQT().empty() && (shapeOf(getQT()[0]) != ArrayRef<int64_t>(transposedShape(x)) ||
                           elementOf(getQT()[0]) != elementOf(getQ())))
    return emitOpError("q_t must be x's transpose (its last dimension first) in q's type");
  return checkLoad(*this, getX(), getLoadBf16());
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
// scale_inv depends on the amax alone.
OpShardingRule Fp8QuantizeOp::getShardingRule() {
  RuleBuilder b(*this);
  SmallVector<int> dims = b.factors(rankOf(getX()));
  b.operandDims(0, dims).resultDims(0, dims);
  if (!getQT().empty()) {
    b.result(2, 0, dims.back());
    for (size_t d = 0; d + 1 < dims.size(); ++d) b.result(2, d + 1, dims[d]);
  }
  for (int f : dims) b.independent(1, f);
  return b.take();
}
void Fp8QuantizeOp::traceSequence(SequenceTrace& trace) {
  // The scale comes from the amax, which holds every position: each position's codes depend on
  // its own value alone.
  if (trace.operand() != 0) return;
  const int64_t d = trace.dim();
  trace.set(getQ(), d);
  if (!getQT().empty()) trace.set(getQT()[0], d + 1 == rankOf(getX()) ? 0 : d + 1);
}

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
