#include "sharding/SequenceDims.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/BuiltinTypes.h"

#include "dist/IR/DistOps.h"
#include "graph/IR/GraphDialect.h"
#include "graph/IR/GraphOps.h"

using namespace mlir;

namespace dtc::sharding {
namespace {

ArrayRef<int64_t> shapeOf(Value v) { return cast<RankedTensorType>(v.getType()).getShape(); }
int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

class Tracer {
 public:
  explicit Tracer(SequenceFlow& flow) : flow_(flow) {}

  void visit(Operation* op) {
    SmallVector<std::pair<unsigned, int64_t>> carried;
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (auto it = flow_.dims.find(v); it != flow_.dims.end()) carried.push_back({i, it->second});
    if (carried.empty()) return;
    const int64_t d = carried.front().second;
    if (d == SequenceFlow::kMergedRows) {
      if (!isa<graph::SoftmaxCrossEntropyOp, graph::NllLossOp, graph::LabelFractionOp,
               graph::MseOp>(op))
        ordered(op, "reads positions merged into rows");
      return;
    }
    llvm::TypeSwitch<Operation*>(op)
        .Case<graph::EmbeddingOp>([&](graph::EmbeddingOp e) {
          if (e.getIds() == op->getOperand(carried.front().first))
            set(e.getResult(), d);
          else
            ordered(op, "indexes a table by position");
        })
        .Case<graph::AddOp, graph::SubOp, graph::MulOp, graph::DivOp>(
            [&](Operation*) { broadcast(op, carried); })
        .Case<graph::GeluOp, graph::ReluOp, graph::TanhOp, graph::SigmoidOp, graph::SiluOp,
              graph::ExpOp, graph::LogOp, graph::SqrtOp, graph::ReciprocalOp, graph::ErfOp,
              graph::AbsOp, graph::PowOp, graph::ScaleOp, graph::CastOp, graph::DropoutOp>(
            [&](Operation*) {
              for (Value r : op->getResults())
                if (shapeOf(r) == shapeOf(op->getOperand(0))) set(r, d);
            })
        .Case<graph::SoftmaxOp, graph::SwigluOp, graph::LayerNormOp, graph::RmsNormOp,
              graph::LinearOp>([&](Operation*) {
          // Over the last dimension: the sequence must be another.
          if (d >= rankOf(op->getOperand(0)) - 1 || carried.front().first != 0)
            return ordered(op, "mixes positions");
          for (Value r : op->getResults())
            if (rankOf(r) > d && shapeOf(r)[d] == shapeOf(op->getOperand(0))[d]) set(r, d);
        })
        .Case<graph::ReshapeOp>([&](graph::ReshapeOp r) { reshape(r, d); })
        // A layout pinned on a value (sequence parallelism's) moves no position.
        .Case<dist::ReshardOp>([&](dist::ReshardOp r) { set(r.getResult(), d); })
        .Case<graph::BroadcastOp>([&](graph::BroadcastOp b) {
          // Right-aligned; a sequence of one position repeated is no sequence.
          const int64_t at = d + rankOf(b.getResult()) - rankOf(b.getX());
          if (shapeOf(b.getResult())[at] != shapeOf(b.getX())[d])
            return ordered(op, "repeats one position");
          set(b.getResult(), at);
        })
        .Case<graph::TransposeOp>([&](graph::TransposeOp t) {
          for (auto [j, p] : llvm::enumerate(t.getPerm()))
            if (p == d) set(t.getResult(), static_cast<int64_t>(j));
        })
        .Case<graph::SplitOp>([&](graph::SplitOp s) {
          if (static_cast<int64_t>(s.getAxis()) == d) return ordered(op, "splits the sequence");
          for (Value r : s.getResults()) set(r, d);
        })
        .Case<graph::ConcatOp>([&](graph::ConcatOp c) {
          if (static_cast<int64_t>(c.getAxis()) == d)
            return ordered(op, "concatenates along the sequence");
          set(c.getResult(), d);
        })
        .Case<graph::CausalAttentionOp>([&](graph::CausalAttentionOp a) {
          // Attention knows positions (seq_axes, seq_chunks): q, k and v carry the sequence at
          // -2, or it reaches attention some other way.
          const int64_t t = rankOf(a.getQ()) - 2;
          for (auto [i, dim] : carried)
            if (dim != t) return ordered(op, "reaches attention along another dimension");
          set(a.getOut(), t);
          set(a.getLse(), t);
        })
        .Case<graph::RotaryOp>([&](graph::RotaryOp r) {
          const int64_t t = rankOf(r.getX()) - 2;
          if (carried.front().first != 0 || d != t)
            return ordered(op, "rotates along another dimension");
          set(r.getY(), t);
          for (Value table : {r.getCos(), r.getSin()})
            if (!flow_.dims.count(table)) table_(table, rankOf(table) - 2);
        })
        .Case<graph::SoftmaxCrossEntropyOp, graph::NllLossOp, graph::LabelFractionOp, graph::MseOp>(
            [&](Operation*) {})  // sums over positions
        .Case<graph::MoeRouteOp, graph::MoeDispatchOp>(
            [&](Operation*) { ordered(op, "fills its experts' capacity in token order"); })
        .Default([&](Operation*) { ordered(op, "is not known to keep positions apart"); });
  }

 private:
  void set(Value v, int64_t d) { flow_.dims[v] = d; }
  void ordered(Operation* op, const char* why) { flow_.ordered.push_back({op, why}); }
  void table_(Value v, int64_t dim) {
    for (const SequenceFlow::PositionTable& t : flow_.tables)
      if (t.value == v && t.dim == dim) return;
    flow_.tables.push_back({v, dim});
  }

  // NumPy broadcasting: the result's sequence dimension from the operand that has it; an operand
  // without one that is not broadcast there is indexed by position.
  void broadcast(Operation* op, ArrayRef<std::pair<unsigned, int64_t>> carried) {
    const int64_t rank = rankOf(op->getResult(0));
    const auto [first, d] = carried.front();
    const int64_t at = d + rank - rankOf(op->getOperand(first));
    for (auto [i, dim] : carried)
      if (dim + rank - rankOf(op->getOperand(i)) != at)
        return ordered(op, "adds positions to other positions");
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      if (flow_.dims.count(v)) continue;
      const int64_t aligned = at - (rank - rankOf(v));
      if (aligned >= 0 && shapeOf(v)[aligned] != 1) table_(v, aligned);
    }
    set(op->getResult(0), at);
  }

  // A reshape that keeps the sequence dimension (the same size, after the same number of
  // elements' worth of leading dimensions) moves it; one that merges it into rows marks them.
  void reshape(graph::ReshapeOp r, int64_t d) {
    ArrayRef<int64_t> from = shapeOf(r.getX()), to = shapeOf(r.getResult());
    int64_t before = 1;
    for (int64_t i = 0; i < d; ++i) before *= from[i];
    int64_t prefix = 1;
    for (int64_t j = 0; j < static_cast<int64_t>(to.size()); ++j) {
      if (prefix == before && to[j] == from[d]) return set(r.getResult(), j);
      prefix *= to[j];
    }
    // Merged with the dimensions before it (rows of a loss), nothing after it.
    int64_t after = 1, merged = 1;
    for (int64_t i = d + 1; i < static_cast<int64_t>(from.size()); ++i) after *= from[i];
    for (int64_t j = 1; j < static_cast<int64_t>(to.size()); ++j) merged *= to[j];
    if (merged == after) return set(r.getResult(), SequenceFlow::kMergedRows);
    flow_.ordered.push_back({r, "reshapes the sequence"});
  }

  SequenceFlow& flow_;
};

}  // namespace

SmallVector<std::pair<Value, int64_t>> sequenceInputs(func::FuncOp func, int64_t length) {
  SmallVector<std::pair<Value, int64_t>> inputs;
  for (BlockArgument arg : func.getArguments()) {
    const unsigned i = arg.getArgNumber();
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t dim = 0;
    if (auto bd = func.getArgAttrOfType<IntegerAttr>(i, attr::kBatchDim)) dim = bd.getInt();
    if (func.getArgAttr(i, attr::kData) && type.getRank() > dim + 1 &&
        type.getDimSize(dim + 1) == length)
      inputs.push_back({arg, dim + 1});
  }
  return inputs;
}

SequenceFlow traceSequence(func::FuncOp func, ArrayRef<std::pair<Value, int64_t>> inputs) {
  SequenceFlow flow;
  for (auto [v, d] : inputs) flow.dims[v] = d;
  Tracer tracer(flow);
  for (Operation& op : func.getBody().front().without_terminator()) tracer.visit(&op);
  return flow;
}

}  // namespace dtc::sharding
