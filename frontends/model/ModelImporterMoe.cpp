// The mixture-of-experts layer of the model format, expanded into graph ops: the router, the
// routing with capacity, dispatch, the experts as batched GEMMs over [E, ...] weights, the
// weighted combine, and the router's two losses.
#include <string>

#include "graph/IR/GraphOps.h"
#include "model/ModelImporterImpl.h"

namespace dtc::detail {

namespace {

// The experts' MLP: GELU (GPT-2's, tanh-approximated, or exact) with biases, or SwiGLU without.
enum class ExpertActivation { kGeluTanh, kGelu, kSwiglu };

std::optional<ExpertActivation> parseActivation(StringRef name) {
  if (name == "gelu_tanh") return ExpertActivation::kGeluTanh;
  if (name == "gelu") return ExpertActivation::kGelu;
  if (name == "swiglu") return ExpertActivation::kSwiglu;
  return std::nullopt;
}

std::string textAttr(const model::Attribute* a, StringRef fallback) {
  return a && a->s() ? a->s()->str() : fallback.str();
}

}  // namespace

// MixtureOfExperts: (x [G, S, C], router [E, C], then the experts' weights, [E, in, out] as
// batched GEMMs take them: GELU's fc [E, C, F], fc bias [E, F], proj [E, F, C], proj bias
// [E, C]; SwiGLU's gate and up [E, C, F] and down [E, F, C]) -> (y [G, S, C], and optionally
// Switch's load-balancing loss E·Σ fᵢ·Pᵢ and the router's z-loss mean(logsumexp(logits)²),
// both unweighted).
LogicalResult ModelImporter::importMixtureOfExperts(const model::Node& node, Location loc) {
  const auto activation = parseActivation(textAttr(attribute(node, "activation"), "gelu_tanh"));
  if (!activation)
    return emitError(loc) << "MixtureOfExperts: activation must be 'gelu_tanh', 'gelu' or "
                             "'swiglu', got '"
                          << textAttr(attribute(node, "activation"), "") << "'";
  const bool swiglu = *activation == ExpertActivation::kSwiglu;
  const size_t weights = swiglu ? 5 : 6;
  auto in = inputs(node, loc, weights, weights);
  if (failed(in)) return failure();
  Value x = (*in)[0], router = (*in)[1];
  ArrayRef<int64_t> xs = shapeOf(x), rs = shapeOf(router);
  if (xs.size() != 3 || rs.size() != 2 || rs[1] != xs[2])
    return emitError(loc) << "MixtureOfExperts needs x [G, S, C] and a router [E, C], got "
                          << graph::shapeString(xs) << " and " << graph::shapeString(rs);
  const int64_t G = xs[0], S = xs[1], C = xs[2], E = rs[0];
  const int64_t k = intAttr(node, "top_k", 2);
  const double factor = floatAttr(node, "capacity_factor", 1.25);
  if (auto error = graph::checkMoeRouting(E, k, factor))
    return emitError(loc) << "MixtureOfExperts: " << *error;
  const std::string score = textAttr(attribute(node, "score"), "softmax");
  if (score != "softmax" && score != "sigmoid")
    return emitError(loc) << "MixtureOfExperts: score must be 'softmax' or 'sigmoid', got '"
                          << score << "'";
  const int64_t F = shapeOf((*in)[2]).size() == 3 ? shapeOf((*in)[2])[2] : -1;
  auto expect = [&](size_t i, ArrayRef<int64_t> shape, StringRef what) -> LogicalResult {
    if (shapeOf((*in)[i]) == shape) return success();
    return emitError(loc) << "MixtureOfExperts: " << what << " must be "
                          << graph::shapeString(shape) << " for " << E << " experts of width " << C
                          << ", got " << graph::shapeString(shapeOf((*in)[i]));
  };
  if (swiglu) {
    if (failed(expect(2, {E, C, F}, "the gate projection")) ||
        failed(expect(3, {E, C, F}, "the up projection")) ||
        failed(expect(4, {E, F, C}, "the down projection")))
      return failure();
  } else if (failed(expect(2, {E, C, F}, "the fc weight")) ||
             failed(expect(3, {E, F}, "the fc bias")) ||
             failed(expect(4, {E, F, C}, "the projection weight")) ||
             failed(expect(5, {E, C}, "the projection bias"))) {
    return failure();
  }
  const size_t outputs = node.outputs() ? node.outputs()->size() : 0;
  if (outputs < 1 || outputs > 3)
    return emitError(loc) << "MixtureOfExperts has 1 to 3 outputs (y, load-balancing loss, "
                             "z-loss), the node names "
                          << outputs;

  // Expert parallelism splits these by their first dimension, the experts.
  for (size_t i = 2; i < weights; ++i)
    if (auto arg = dyn_cast<BlockArgument>((*in)[i]);
        arg && func_.getArgAttr(arg.getArgNumber(), attr::kParam))
      func_.setArgAttr(arg.getArgNumber(), attr::kExpert, builder_.getUnitAttr());
  OpBuilder& b = builder_;
  const int64_t capacity = graph::moeCapacity(S, E, k, factor);
  Value logits = graph::LinearOp::create(b, loc, x, router);
  Value scores = score == "softmax"
                     ? Value(graph::SoftmaxOp::create(b, loc, logits, b.getF32FloatAttr(1.0f),
                                                      b.getBoolAttr(false)))
                     : Value(graph::SigmoidOp::create(b, loc, logits));
  auto route =
      graph::MoeRouteOp::create(b, loc, scores, k, capacity, intAttr(node, "normalize", 0) != 0);
  auto bufferType = RankedTensorType::get({E, G, capacity, C}, b.getF32Type());
  Value buffer =
      graph::MoeDispatchOp::create(b, loc, bufferType, x, route.getExpert(), route.getSlot());
  // Each expert's slots of every group are one GEMM's rows.
  Value rows = reshape(buffer, {E, G * capacity, C}, loc);
  auto gemm = [&](Value lhs, Value w) {
    return Value(graph::BatchMatmulOp::create(b, loc, lhs, w, false, false));
  };
  auto addBias = [&](Value y, Value bias) {
    const int64_t width = shapeOf(bias)[1];
    return Value(graph::AddOp::create(b, loc, y, reshape(bias, {E, 1, width}, loc)));
  };
  Value out;
  if (swiglu) {
    Value gate = gemm(rows, (*in)[2]), up = gemm(rows, (*in)[3]);
    Value h = graph::SwigluOp::create(b, loc, gate.getType(), gate, up);
    out = gemm(h, (*in)[4]);
  } else {
    Value h = addBias(gemm(rows, (*in)[2]), (*in)[3]);
    h = graph::GeluOp::create(b, loc, h, *activation == ExpertActivation::kGeluTanh);
    out = addBias(gemm(h, (*in)[4]), (*in)[5]);
  }
  Value y = graph::MoeCombineOp::create(b, loc, reshape(out, {E, G, capacity, C}, loc),
                                        route.getExpert(), route.getSlot(), route.getWeight());
  SmallVector<Value> results{y};
  const double tokens = static_cast<double>(G * S);
  if (outputs >= 2) {
    // Switch's loss over every token: E · Σᵢ fᵢ·Pᵢ, f the fraction of choices of expert i, P
    // its mean score (Mixtral's form for k > 1: f sums to k).
    Value f = graph::ReduceSumOp::create(b, loc, route.getLoad(), ArrayRef<int64_t>{0, 1}, false);
    Value p = graph::ReduceSumOp::create(b, loc, scores, ArrayRef<int64_t>{0, 1}, false);
    Value fp = graph::ReduceSumOp::create(b, loc, graph::MulOp::create(b, loc, f, p),
                                          ArrayRef<int64_t>{0}, false);
    results.push_back(graph::ScaleOp::create(
        b, loc, fp, b.getF32FloatAttr(static_cast<float>(E / (tokens * tokens)))));
  }
  if (outputs >= 3) {
    Value lse = graph::LogSumExpOp::create(b, loc, logits);
    Value sq = graph::ReduceSumOp::create(b, loc, graph::MulOp::create(b, loc, lse, lse),
                                          ArrayRef<int64_t>{0, 1}, false);
    results.push_back(
        graph::ScaleOp::create(b, loc, sq, b.getF32FloatAttr(static_cast<float>(1.0 / tokens))));
  }
  return define(node, loc, results);
}

}  // namespace dtc::detail
